package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

// The bank test: many clients move credits of a few tenants at once through the real HTTP surface, in
// every way a request can (member and tenant charges, failed jobs refunded, set-quota in both directions,
// allocations to new members, administrator credits). No answer may be a 5xx (a deadlock or a
// serialization failure must be retried, not answered 500) and no credit may appear or vanish.
//
// It runs on PostgreSQL, where transactions wait on each other's row locks: that is where a lock taken in
// the wrong order deadlocks. SQLite serialises every transaction on its one writer connection, so the
// test has nothing to find there and is skipped.

const (
	bankClients = 200
	bankTenants = 3
	bankMembers = 4 // per tenant: two start shared, two dedicated
	bankOpening = 200_000
	bankRun     = 3 * time.Second
)

type bankTenant struct {
	id, key string
	members []string // account ids
	keys    []string // member keys, by member
}

type bankStats struct {
	mu       sync.Mutex
	statuses map[string]map[int]int // operation -> status -> count
	fivexx   []string
	granted  atomic.Int64 // credits granted by administrator credits during the run
}

func (s *bankStats) record(op string, status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statuses[op] == nil {
		s.statuses[op] = map[int]int{}
	}
	s.statuses[op][status]++
	if status >= 500 && len(s.fivexx) < 20 {
		s.fivexx = append(s.fivexx, fmt.Sprintf("%s -> %d %s", op, status, truncate(body)))
	}
}

func TestBankConcurrentCredits(t *testing.T) {
	if modelstest.PostgresURL() == "" {
		t.Skip("the bank test looks for lock-order deadlocks, which only PostgreSQL has: set TEST_DATABASE_URL=postgres://... to run it")
	}
	fake, upstreams := fakeUpstreams(t)
	// Jobs on img-c fail (its family has no backup): each is refunded by a worker while charges run.
	fake.SetChannelFault("img-c", fakeupstream.Fault{Mode: fakeupstream.ServerError})
	e := newEnv(t, upstreams, withVar("SERVICE_GENERATE_RATE", "100000000"))
	e.skipSpec = true

	tenants := make([]*bankTenant, bankTenants)
	for i := range tenants {
		id, key := e.tenant(fmt.Sprintf("Bank %d", i), bankOpening)
		bt := &bankTenant{id: id, key: key}
		for m := range bankMembers {
			in := map[string]any{"action": "create", "email": fmt.Sprintf("m%d-%d@example.com", i, m)}
			if m >= 2 {
				in["credits"] = 1000
			}
			r := e.call("POST", "/api/tenant-accounts", key, in).expect(t, 200)
			acc := r.JSON["account"].(map[string]any)
			bt.members = append(bt.members, acc["id"].(string))
			bt.keys = append(bt.keys, acc["api_key"].(string))
		}
		tenants[i] = bt
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: bankClients, MaxIdleConnsPerHost: bankClients}}
	t.Cleanup(client.CloseIdleConnections)
	post := func(path, key string, body any) (int, []byte) {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", e.srv.URL+path, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		res, err := client.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}

	stats := &bankStats{statuses: map[string]map[int]int{}}
	var sent atomic.Int64
	deadline := time.Now().Add(bankRun)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range bankClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bt := tenants[c%bankTenants]
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			<-start
			for n := 0; time.Now().Before(deadline); n++ {
				m := rng.IntN(bankMembers)
				model := "img-a"
				if rng.IntN(3) == 0 {
					model = "img-c" // fails upstream: refunded
				}
				var op string
				var status int
				var body []byte
				switch p := rng.IntN(100); {
				case p < 45:
					op = "member generate"
					status, body = post("/api/generate", bt.keys[m], map[string]any{"prompt": "bank", "model": model})
				case p < 55:
					op = "tenant generate"
					status, body = post("/api/generate", bt.key, map[string]any{"prompt": "bank", "model": model})
				case p < 70:
					op = "set-quota shared"
					status, body = post("/api/tenant-accounts", bt.key, map[string]any{"action": "set-quota", "account_id": bt.members[m], "shared": true})
				case p < 85:
					op = "set-quota credits"
					status, body = post("/api/tenant-accounts", bt.key, map[string]any{"action": "set-quota", "account_id": bt.members[m], "credits": rng.IntN(60)})
				case p < 95:
					op = "allocate new member"
					status, body = post("/api/tenant-accounts", bt.key, map[string]any{"action": "create",
						"email": fmt.Sprintf("c%d-%d@example.com", c, n), "credits": 5})
				default:
					op = "admin credit"
					status, body = post("/api/admin", e.adminKey, map[string]any{"action": "tenant-credit", "tenant_id": bt.id, "credits": 10})
					if status == 200 {
						stats.granted.Add(10)
					}
				}
				sent.Add(1)
				stats.record(op, status, body)
			}
		}()
	}
	close(start)
	wg.Wait()

	// Let the workers finish the jobs (the failed ones are refunded), then count the money.
	waitUntil := time.Now().Add(20 * time.Second)
	var open int64
	for time.Now().Before(waitUntil) {
		e.app.DB.Gorm.Model(&models.Job{}).Where("status NOT IN ?", []string{"done", "failed"}).Count(&open)
		if open == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if open != 0 {
		t.Errorf("%d jobs still open 20 s after the run", open)
	}

	ops := make([]string, 0, len(stats.statuses))
	for op := range stats.statuses {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var fivexx int
	for _, op := range ops {
		for status, n := range stats.statuses[op] {
			if status >= 500 || status == 0 {
				fivexx += n
			}
		}
		t.Logf("%-20s %v", op, stats.statuses[op])
		if stats.statuses[op][200] == 0 {
			t.Errorf("%s never succeeded: the mix did not exercise it", op)
		}
	}
	t.Logf("%d requests from %d clients on %d tenants in %v; %d answered 5xx", sent.Load(), bankClients, bankTenants, bankRun, fivexx)
	if fivexx != 0 {
		t.Errorf("%d of %d requests answered 5xx (or no answer), want 0:\n%s", fivexx, sent.Load(), strings.Join(stats.fivexx, "\n"))
	}
	drift := bankDrift(t, e, int64(bankTenants*bankOpening)+stats.granted.Load())
	for _, d := range drift {
		t.Errorf("drift: %s", d)
	}
	t.Logf("drift: %d discrepancies", len(drift))
}

// bankDrift returns every discrepancy in the books: each balance against the sum of its ledger rows
// (AuditLedger), each tenant's reserved part against its dedicated members' credits, and the money as a
// whole: what was granted equals what the tenants hold plus what their jobs that were not refunded cost.
func bankDrift(t *testing.T, e *env, granted int64) []string {
	t.Helper()
	out, err := e.app.Credits().AuditLedger(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	db := e.app.DB
	var tenants []models.Tenant
	if err := db.Gorm.Find(&tenants).Error; err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, ten := range tenants {
		var dedicated int64
		db.Gorm.Model(&models.Account{}).Where("tenant_id = ? AND shared = ?", ten.ID, false).Select("COALESCE(SUM(credits), 0)").Scan(&dedicated)
		if ten.Reserved != dedicated {
			out = append(out, fmt.Sprintf("tenant %s: reserved %d, dedicated credits of its members %d", ten.Name, ten.Reserved, dedicated))
		}
		if ten.Spendable < 0 || ten.Reserved < 0 {
			out = append(out, fmt.Sprintf("tenant %s: negative pool %d/%d", ten.Name, ten.Spendable, ten.Reserved))
		}
		held += ten.Spendable + ten.Reserved
	}
	var spent int64
	db.Gorm.Model(&models.Job{}).Where("refunded_at IS NULL AND charged_to <> ?", models.ChargedUnmetered).Select("COALESCE(SUM(credits), 0)").Scan(&spent)
	if held+spent != granted {
		out = append(out, fmt.Sprintf("granted %d credits, tenants hold %d and jobs not refunded cost %d: %d unaccounted",
			granted, held, spent, granted-held-spent))
	}
	return out
}
