package rest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"studio/models"
)

// member creates a member account through the API and returns its id and key.
func (e *env) member(tenantKey string, body map[string]any) (id, key string) {
	e.t.Helper()
	body["action"] = "create"
	if body["email"] == nil {
		body["email"] = models.NewID()[:8] + "@example.com"
	}
	r := e.call("POST", "/api/tenant-accounts", tenantKey, body).expect(e.t, 200)
	acc := r.JSON["account"].(map[string]any)
	return acc["id"].(string), acc["api_key"].(string)
}

// expectPool fails the test unless the tenant's pool is spendable/reserved (and balance their sum).
func (e *env) expectPool(t *testing.T, tenantKey string, spendable, reserved float64) {
	t.Helper()
	p := e.call("GET", "/api/tenant-pool", tenantKey, nil).expect(t, 200)
	if p.num("spendable") != spendable || p.num("reserved") != reserved || p.num("balance") != spendable+reserved {
		t.Fatalf("pool = %s, want spendable %v reserved %v", p.Body, spendable, reserved)
	}
}

func setQuota(accountID string, fields map[string]any) map[string]any {
	fields["action"], fields["account_id"] = "set-quota", accountID
	return fields
}

func TestTenantEndpointsRefuseOtherIdentities(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme", 10)
	_, memberKey := e.member(tenantKey, map[string]any{})
	_, login := e.personalLogin("me@example.com", 0)
	requests := []struct{ method, path string }{
		{"GET", "/api/tenant-pool"}, {"GET", "/api/tenant-stats"}, {"GET", "/api/tenant-usage"},
		{"GET", "/api/tenant-accounts"}, {"POST", "/api/tenant-accounts"},
	}
	keys := []struct {
		name   string
		key    string
		status int
	}{
		{"member key", memberKey, 403}, {"personal login", login, 403}, {"administrator key", e.adminKey, 403},
		{"no key", "", 401}, {"unknown key", models.NewAPIKey(), 401},
	}
	for _, rq := range requests {
		for _, k := range keys {
			t.Run(rq.method+" "+rq.path+" with "+k.name, func(t *testing.T) {
				r := e.call(rq.method, rq.path, k.key, map[string]any{"action": "create", "email": "x@example.com"})
				if r.Status != k.status || r.str("error") == "" {
					t.Fatalf("got %d %s, want %d with an error", r.Status, r.Body, k.status)
				}
			})
		}
	}
	var n int64
	e.app.DB.Gorm.Model(&models.Account{}).Count(&n)
	if n != 1 {
		t.Fatalf("accounts = %d after refused creations, want 1", n)
	}
}

func TestCreateMemberAccounts(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme", 100)
	r := e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "create", "email": "Ann@Example.com", "nickname": "Ann"}).expect(t, 200)
	shared := r.JSON["account"].(map[string]any)
	if r.JSON["ok"] != true || shared["shared"] != true || shared["credits"] != 0.0 || shared["email"] != "ann@example.com" ||
		shared["nickname"] != "Ann" || shared["disabled"] != false || !models.ValidKeyFormat(shared["api_key"].(string)) {
		t.Fatalf("shared member = %s", r.Body)
	}
	e.expectPool(t, tenantKey, 100, 0)
	r = e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "create", "email": "bo@example.com", "nickname": "Bo", "credits": 30}).expect(t, 200)
	dedicated := r.JSON["account"].(map[string]any)
	if dedicated["shared"] != false || dedicated["credits"] != 30.0 {
		t.Fatalf("dedicated member = %s", r.Body)
	}
	e.expectPool(t, tenantKey, 70, 30)

	refused := []struct {
		name string
		body any
		msg  string
	}{
		{"credits above spendable", map[string]any{"action": "create", "email": "c@example.com", "credits": 71}, "可分配积分不足"},
		{"invalid email", map[string]any{"action": "create", "email": "nope"}, ""},
		{"missing email", map[string]any{"action": "create", "nickname": "x"}, ""},
		{"negative credits", map[string]any{"action": "create", "email": "c@example.com", "credits": -1}, ""},
		{"fractional credits", `{"action":"create","email":"c@example.com","credits":1.5}`, ""},
		{"shared with credits", map[string]any{"action": "create", "email": "c@example.com", "shared": true, "credits": 1}, ""},
		{"unknown action", map[string]any{"action": "explode"}, ""},
		{"missing action", map[string]any{"email": "c@example.com"}, ""},
		{"malformed JSON", `{"action":`, ""},
		{"empty body", ``, ""},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/tenant-accounts", tenantKey, c.body)
			if r.Status != 400 || r.str("error") == "" || (c.msg != "" && r.str("error") != c.msg) {
				t.Fatalf("got %d %s, want 400 %q", r.Status, r.Body, c.msg)
			}
		})
	}
	e.expectPool(t, tenantKey, 70, 30)

	list := e.call("GET", "/api/tenant-accounts", tenantKey, nil).expect(t, 200)
	accounts := list.JSON["accounts"].([]any)
	if list.JSON["ok"] != true || len(accounts) != 2 {
		t.Fatalf("list = %s", list.Body)
	}
	for i, want := range []map[string]any{shared, dedicated} {
		got := accounts[i].(map[string]any)
		for _, f := range []string{"id", "email", "nickname", "shared", "credits", "disabled", "api_key", "created_at"} {
			if got[f] != want[f] {
				t.Errorf("listed %s = %v, created %v", f, got[f], want[f])
			}
		}
	}
	b := e.call("GET", "/api/balance", shared["api_key"].(string), nil).expect(t, 200)
	if b.num("credits") != 70 || b.str("identity") != "account" {
		t.Errorf("shared member balance = %s, want the pool's spendable 70", b.Body)
	}
	b = e.call("GET", "/api/balance", dedicated["api_key"].(string), nil).expect(t, 200)
	if b.num("credits") != 30 {
		t.Errorf("dedicated member balance = %s, want 30", b.Body)
	}
	_, otherKey := e.tenant("Other", 0)
	if o := e.call("GET", "/api/tenant-accounts", otherKey, nil).expect(t, 200); len(o.JSON["accounts"].([]any)) != 0 {
		t.Errorf("another tenant lists %s", o.Body)
	}
}

func TestSetQuotaMovesCreditsAbsolutely(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme", 100)
	id, key := e.member(tenantKey, map[string]any{"credits": 30})
	e.expectPool(t, tenantKey, 70, 30)
	steps := []struct {
		name                string
		body                map[string]any
		shared              bool
		credits             float64
		spendable, reserved float64
	}{
		{"raise", map[string]any{"credits": 50}, false, 50, 50, 50},
		{"lower returns the remainder", map[string]any{"credits": 10}, false, 10, 90, 10},
		{"the maximum is spendable plus current", map[string]any{"credits": 100}, false, 100, 0, 100},
		{"shared returns every unspent credit", map[string]any{"shared": true}, true, 0, 100, 0},
		{"shared again changes nothing", map[string]any{"shared": true}, true, 0, 100, 0},
		{"from shared to dedicated", map[string]any{"credits": 25, "shared": false}, false, 25, 75, 25},
		{"zero dedicated credits", map[string]any{"credits": 0}, false, 0, 100, 0},
	}
	for _, s := range steps {
		r := e.call("POST", "/api/tenant-accounts", tenantKey, setQuota(id, s.body)).expect(t, 200)
		acc := r.JSON["account"].(map[string]any)
		if acc["id"] != id || acc["shared"] != s.shared || acc["credits"] != s.credits || acc["api_key"] != key {
			t.Fatalf("%s: account = %s", s.name, r.Body)
		}
		e.expectPool(t, tenantKey, s.spendable, s.reserved)
	}
	e.call("POST", "/api/tenant-accounts", tenantKey, setQuota(id, map[string]any{"credits": 40})).expect(t, 200)
	e.expectPool(t, tenantKey, 60, 40)
	// The member spends 15 of its 40: a lower value returns only what is left above it.
	who, err := e.app.Auth().ResolveIdentity(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Tx(context.Background(), func(tx *gorm.DB) error {
		_, err := e.app.Credits().ChargeTx(tx, who, 15, "", "test spend")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.expectPool(t, tenantKey, 60, 25)
	e.call("POST", "/api/tenant-accounts", tenantKey, setQuota(id, map[string]any{"credits": 5})).expect(t, 200)
	e.expectPool(t, tenantKey, 80, 5)

	_, otherKey := e.tenant("Other", 10)
	otherID, _ := e.member(otherKey, map[string]any{})
	refused := []struct {
		name   string
		body   map[string]any
		status int
		msg    string
	}{
		{"above spendable plus current", setQuota(id, map[string]any{"credits": 86}), 400, "可分配积分不足"},
		{"negative", setQuota(id, map[string]any{"credits": -1}), 400, ""},
		{"neither shared nor credits", setQuota(id, map[string]any{}), 400, ""},
		{"shared false alone", setQuota(id, map[string]any{"shared": false}), 400, ""},
		{"both", setQuota(id, map[string]any{"shared": true, "credits": 3}), 400, ""},
		{"missing account_id", map[string]any{"action": "set-quota", "credits": 3}, 400, ""},
		{"another tenant's account", setQuota(otherID, map[string]any{"credits": 1}), 404, ""},
		{"unknown account", setQuota(models.NewID(), map[string]any{"credits": 1}), 404, ""},
		{"malformed account id", setQuota("not-an-id'; --", map[string]any{"credits": 1}), 404, ""},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/tenant-accounts", tenantKey, c.body)
			if r.Status != c.status || r.str("error") == "" || (c.msg != "" && r.str("error") != c.msg) {
				t.Fatalf("got %d %s, want %d %q", r.Status, r.Body, c.status, c.msg)
			}
		})
	}
	e.call("POST", "/api/tenant-accounts", tenantKey, setQuota(id, map[string]any{"credits": 85})).expect(t, 200)
	e.expectPool(t, tenantKey, 0, 85)
	e.expectPool(t, otherKey, 10, 0)
	problems, err := e.app.Credits().AuditLedger(context.Background())
	if err != nil || len(problems) != 0 {
		t.Fatalf("ledger audit: %v %v", problems, err)
	}
}

func TestRekeyAndToggleMemberKey(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme", 10)
	id, oldKey := e.member(tenantKey, map[string]any{})
	e.call("GET", "/api/balance", oldKey, nil).expect(t, 200)

	r := e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "rekey", "account_id": id}).expect(t, 200)
	newKey := r.str("api_key")
	if r.JSON["ok"] != true || newKey == oldKey || !models.ValidKeyFormat(newKey) {
		t.Fatalf("rekey = %s", r.Body)
	}
	e.call("GET", "/api/balance", oldKey, nil).expect(t, 401)
	e.call("GET", "/api/balance", newKey, nil).expect(t, 200)
	list := e.call("GET", "/api/tenant-accounts", tenantKey, nil).expect(t, 200)
	if got := list.JSON["accounts"].([]any)[0].(map[string]any)["api_key"]; got != newKey {
		t.Errorf("list shows key %v after rekey, want the new one", got)
	}

	r = e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "toggle", "account_id": id, "disabled": true}).expect(t, 200)
	if r.JSON["ok"] != true || r.JSON["disabled"] != true {
		t.Fatalf("toggle = %s", r.Body)
	}
	d := e.call("GET", "/api/balance", newKey, nil).expect(t, 401)
	if !strings.Contains(d.str("error"), "disabled") {
		t.Errorf("disabled member's error = %q, want it to say the account is disabled", d.str("error"))
	}
	if got := e.call("GET", "/api/tenant-accounts", tenantKey, nil).JSON["accounts"].([]any)[0].(map[string]any)["disabled"]; got != true {
		t.Errorf("listed disabled = %v", got)
	}
	r = e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "toggle", "account_id": id, "disabled": false}).expect(t, 200)
	if r.JSON["disabled"] != false {
		t.Fatalf("enable = %s", r.Body)
	}
	e.call("GET", "/api/balance", newKey, nil).expect(t, 200)

	_, otherKey := e.tenant("Other", 0)
	refused := []struct {
		name   string
		key    string
		body   map[string]any
		status int
	}{
		{"toggle without disabled", tenantKey, map[string]any{"action": "toggle", "account_id": id}, 400},
		{"toggle without account", tenantKey, map[string]any{"action": "toggle", "disabled": true}, 400},
		{"rekey without account", tenantKey, map[string]any{"action": "rekey"}, 400},
		{"rekey of another tenant's account", otherKey, map[string]any{"action": "rekey", "account_id": id}, 404},
		{"toggle of another tenant's account", otherKey, map[string]any{"action": "toggle", "account_id": id, "disabled": true}, 404},
		{"rekey of an unknown account", tenantKey, map[string]any{"action": "rekey", "account_id": models.NewID()}, 404},
		{"toggle of a malformed id", tenantKey, map[string]any{"action": "toggle", "account_id": "x", "disabled": true}, 404},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			if r := e.call("POST", "/api/tenant-accounts", c.key, c.body); r.Status != c.status || r.str("error") == "" {
				t.Fatalf("got %d %s, want %d", r.Status, r.Body, c.status)
			}
		})
	}
	e.call("GET", "/api/balance", newKey, nil).expect(t, 200)
}

func TestTenantStatsEndpoint(t *testing.T) {
	e := newEnv(t)
	r := e.admin(map[string]any{"action": "tenant-create", "name": "Acme", "credits": 20, "markup": 2, "quota_monthly": 500})
	tenantID, tenantKey := r.JSON["tenant"].(map[string]any)["id"].(string), r.str("api_key")
	_, otherKey := e.tenant("Other", 5)
	now := time.Now().UTC()
	for i, j := range []struct {
		status  models.JobStatus
		elapsed int64
		cost    float64
		age     time.Duration
	}{
		{"done", 1000, 0.1, time.Hour}, {"done", 3000, 0.1, 2 * time.Hour}, {"failed", 0, 0.05, 3 * time.Hour},
		{"done", 8000, 0.25, 30 * time.Hour},
	} {
		job := models.Job{ID: models.NewID(), TenantID: &tenantID, Status: j.status, ElapsedMS: j.elapsed, CostUSD: j.cost,
			CreatedAt: now.Add(-j.age), Deadline: now.Add(time.Hour), FinishedAt: &now, RefundedAt: &now}
		if err := e.app.DB.Gorm.Create(&job).Error; err != nil {
			t.Fatal(err)
		}
		for range i + 1 {
			e.app.DB.Gorm.Create(&models.UpstreamAttempt{Upstream: "img", JobID: job.ID, OK: true, At: now.Add(-j.age)})
		}
	}
	s := e.call("GET", "/api/tenant-stats", tenantKey, nil).expect(t, 200)
	tenant, mine := s.JSON["tenant"].(map[string]any), s.JSON["mine"].(map[string]any)
	jobs := mine["jobs"].(map[string]any)
	if s.num("window_hours") != 24 || tenant["name"] != "Acme" || tenant["quota_monthly"] != 500.0 || tenant["used_month"] != 0.0 || tenant["credits"] != 20.0 {
		t.Errorf("stats = %s", s.Body)
	}
	if jobs["total"] != 3.0 || jobs["done"] != 2.0 || jobs["failed"] != 1.0 || jobs["processing"] != 0.0 ||
		jobs["success_rate"] != 2.0/3.0 || jobs["p95_ms"] != 3000.0 || mine["attempts_total"] != 6.0 {
		t.Errorf("mine = %s", s.Body)
	}
	if mine["charged_cny"] != 3.6 { // (0.1 + 0.1 + 0.05) USD * 7.2 * markup 2
		t.Errorf("charged_cny = %v, want 3.6", mine["charged_cny"])
	}
	for _, gone := range []string{"by_provider", "balance_cny", "balance_usd", "site", "overall"} {
		if strings.Contains(string(s.Body), gone) {
			t.Errorf("stats carry %q: %s", gone, s.Body)
		}
	}
	windows := []struct {
		query string
		hours float64
		total float64
	}{
		{"", 24, 3}, {"?hours=", 24, 3}, {"?hours=abc", 24, 3}, {"?hours=0", 24, 3}, {"?hours=-5", 24, 3},
		{"?hours=2", 2, 1}, {"?hours=48", 48, 4}, {"?hours=168", 168, 4}, {"?hours=169", 168, 4}, {"?hours=100000", 168, 4},
	}
	for _, w := range windows {
		s := e.call("GET", "/api/tenant-stats"+w.query, tenantKey, nil).expect(t, 200)
		if s.num("window_hours") != w.hours || s.JSON["mine"].(map[string]any)["jobs"].(map[string]any)["total"] != w.total {
			t.Errorf("%q: window %v total %v, want %v and %v", w.query, s.num("window_hours"), s.JSON["mine"].(map[string]any)["jobs"].(map[string]any)["total"], w.hours, w.total)
		}
	}
	o := e.call("GET", "/api/tenant-stats", otherKey, nil).expect(t, 200)
	oj := o.JSON["mine"].(map[string]any)["jobs"].(map[string]any)
	if oj["total"] != 0.0 || o.JSON["tenant"].(map[string]any)["quota_monthly"] != 0.0 || o.JSON["mine"].(map[string]any)["charged_cny"] != 0.0 {
		t.Errorf("another tenant's stats = %s", o.Body)
	}
}

func TestTenantUsageEndpoint(t *testing.T) {
	e := newEnv(t)
	tenantID, tenantKey := e.tenant("Acme", 0)
	otherID, _ := e.tenant("Other", 0)
	clock := time.Date(2026, 11, 21, 15, 59, 0, 0, time.UTC) // 23:59 on 21 November in Shanghai
	e.app.Now = func() time.Time { return clock }
	record := func(tenantID, service, agent string) {
		t.Helper()
		if err := e.app.Tx(context.Background(), func(tx *gorm.DB) error {
			return e.app.Credits().RecordUsageTx(tx, tenantID, service, agent)
		}); err != nil {
			t.Fatal(err)
		}
	}
	record(tenantID, models.ServiceImage, "")
	record(tenantID, models.ServiceVideo, "")
	clock = clock.Add(2 * time.Minute) // 00:01 on 22 November in Shanghai
	record(tenantID, models.ServiceImage, "")
	record(tenantID, models.ServiceCopy, "")
	record(tenantID, models.ServiceReverse, "")
	record(tenantID, models.ServiceImageToTemplate, "")
	record(tenantID, "something-new", "")
	record(otherID, models.ServiceImage, "")
	for range 3 {
		e.app.Credits().RecordUsage(tenantID, models.ServiceChat, "helper")
	}
	if err := e.app.Credits().FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}

	u := e.call("GET", "/api/tenant-usage?days=2", tenantKey, nil).expect(t, 200)
	if u.str("timezone") != "Asia/Shanghai" || u.num("days") != 2 || u.str("since") != "2026-11-20T16:00:00Z" ||
		u.JSON["tenant"].(map[string]any)["name"] != "Acme" || u.str("generated_at") != "2026-11-21T16:01:00Z" {
		t.Fatalf("usage = %s", u.Body)
	}
	daily := u.JSON["daily"].([]any)
	want := []map[string]any{
		{"date": "2026-11-21", "image": 1.0, "video": 1.0, "chat": 0.0, "reverse": 0.0, "other": 0.0, "total": 2.0},
		{"date": "2026-11-22", "image": 1.0, "video": 0.0, "chat": 4.0, "reverse": 1.0, "other": 2.0, "total": 8.0},
	}
	if len(daily) != 2 {
		t.Fatalf("daily = %v", daily)
	}
	for i, w := range want {
		for k, v := range w {
			if got := daily[i].(map[string]any)[k]; got != v {
				t.Errorf("daily[%d].%s = %v, want %v", i, k, got, v)
			}
		}
	}
	totals := u.JSON["totals"].(map[string]any)
	if totals["image"] != 2.0 || totals["chat"] != 4.0 || totals["other"] != 2.0 || totals["total"] != 10.0 {
		t.Errorf("totals = %v", totals)
	}

	windows := []struct {
		query string
		days  int
	}{{"", 30}, {"?days=0", 30}, {"?days=abc", 30}, {"?days=-1", 30}, {"?days=1", 1}, {"?days=7", 7}, {"?days=90", 90}, {"?days=91", 90}, {"?days=5000", 90}}
	for _, w := range windows {
		u := e.call("GET", "/api/tenant-usage"+w.query, tenantKey, nil).expect(t, 200)
		daily := u.JSON["daily"].([]any)
		if u.num("days") != float64(w.days) || len(daily) != w.days {
			t.Errorf("%q: days %v with %d rows, want %d", w.query, u.num("days"), len(daily), w.days)
			continue
		}
		if last := daily[len(daily)-1].(map[string]any)["date"]; last != "2026-11-22" {
			t.Errorf("%q: last day %v, want today 2026-11-22", w.query, last)
		}
		first, _ := time.ParseInLocation(time.DateOnly, daily[0].(map[string]any)["date"].(string), models.ShanghaiTZ)
		if since, _ := time.Parse(time.RFC3339, u.str("since")); !since.Equal(first) {
			t.Errorf("%q: since %s is not the local midnight of %s", w.query, u.str("since"), first)
		}
	}
}
