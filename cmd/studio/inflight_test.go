package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"studio/jobs/upstream/fakeupstream"
	kling "studio/jobs/upstream/kling/fake"
	"studio/models"
	"studio/models/modelstest"
)

// slowImages is an OpenAI-compatible image upstream that answers each generation after delay, and counts
// the calls it has in flight at once.
type slowImages struct {
	delay              time.Duration
	mu                 sync.Mutex
	inFlight, most     int
	calls              atomic.Int64
	srv                *httptest.Server
	prompts            map[string]int
	wrongAuth, badPath atomic.Int64
	gate               chan struct{} // while open (not closed) and held, calls wait for it
	held               atomic.Bool
}

// hold keeps every call waiting until release (or until its client goes away).
func (s *slowImages) hold() { s.held.Store(true) }

// release lets the held calls and those after them answer after the delay.
func (s *slowImages) release() { s.held.Store(false); close(s.gate) }

func newSlowImages(t *testing.T, delay time.Duration) *slowImages {
	s := &slowImages{delay: delay, prompts: map[string]int{}, gate: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			s.wrongAuth.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/images/generations" {
			s.badPath.Add(1)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var body struct {
			Prompt string `json:"prompt"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		s.calls.Add(1)
		s.mu.Lock()
		s.inFlight++
		s.most = max(s.most, s.inFlight)
		s.prompts[body.Prompt]++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
		if s.held.Load() {
			select {
			case <-s.gate:
			case <-r.Context().Done():
				return
			}
		}
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"created":1,"data":[{"b64_json":%q}]}`, base64.StdEncoding.EncodeToString(fakeupstream.PNG(body.Prompt)))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *slowImages) figures() (most int, prompts map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.prompts))
	for k, v := range s.prompts {
		out[k] = v
	}
	return s.most, out
}

// slowImagesEnv writes an upstreams file with one image upstream on up (more: its extra fields) and
// returns a fresh database's URL, an admin key and the environment of a replica over them (plus extra).
func slowImagesEnv(t *testing.T, up *slowImages, more string, extra ...string) (dbURL, adminKey string, env []string) {
	t.Helper()
	dir := t.TempDir()
	ups := filepath.Join(dir, "upstreams.yaml")
	yaml := fmt.Sprintf(`upstreams:
  - {name: img-a, provider: alpha, media: image, family: gen2, protocol: openai, base_url: %s, api_key: k, model: m, %s}
`, up.srv.URL+"/v1", more)
	if err := os.WriteFile(ups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey = models.NewAPIKey()
	dbURL = modelstest.URLFor(t)
	env = append([]string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_UPSTREAMS=" + ups,
		"SERVICE_ADMIN_KEY=" + adminKey}, extra...)
	return dbURL, adminKey, env
}

// submitBatches submits n jobs in batches of 32 with prompts prefix 0..n-1 and returns their ids.
func submitBatches(t *testing.T, p *proc, key, prefix, model string, n int) []string {
	t.Helper()
	var ids []string
	for len(ids) < n {
		items := make([]map[string]any, min(32, n-len(ids)))
		for i := range items {
			items[i] = map[string]any{"prompt": fmt.Sprintf("%s %d", prefix, len(ids)+i)}
			if model != "" {
				items[i]["model"] = model
			}
		}
		status, out := p.call(t, "POST", "/api/generate-batch", key, map[string]any{"items": items})
		if status != 200 {
			t.Fatalf("batch: %d %v", status, out)
		}
		for _, j := range out["jobs"].([]any) {
			ids = append(ids, j.(map[string]any)["jobId"].(string))
		}
	}
	return ids
}

// waitAllEnded polls the jobs until each ended and returns how many ended done and failed.
func waitAllEnded(t *testing.T, p *proc, key string, ids []string, within time.Duration) (done, failed int, failures []string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, id := range ids {
		for {
			_, j := p.call(t, "GET", "/api/jobs?id="+id, key, nil)
			if s := j["status"]; s == "done" || s == "failed" {
				if s == "done" {
					done++
				} else {
					failed++
					failures = append(failures, fmt.Sprint(j["error"]))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s still %v (%v) after %s", id, j["status"], j["progress"], within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return done, failed, failures
}

// An upstream with max_concurrency: 2 gets at most two calls at once however many jobs wait for it. A job
// waiting for a slot stays pending with a progress note and its deadline counts from its slot: with a job
// deadline of 3 s and 40 jobs of 1.5 s, the last ones wait some 30 s (past the deadline sweep at 30 s)
// and still end done, each charged once, each upstream call made once.
func TestJobsWaitingForASlotAreNeitherFailedNorChargedTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	up := newSlowImages(t, 1500*time.Millisecond)
	dbURL, adminKey, env := slowImagesEnv(t, up, "soft_timeout: 20s, max_concurrency: 2",
		"SERVICE_JOB_DEADLINE=3s", "SERVICE_GENERATE_RATE=100000")
	p := startStudio(t, env, "serve")
	_, created := p.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 100})
	key := created["api_key"].(string)
	const n = 40
	ids := submitBatches(t, p, key, "slot", "", n)
	// Jobs waiting in line say why, and are still pending well past their deadline of 3 s.
	statuses := func() map[string]int {
		count := map[string]int{}
		for _, id := range ids {
			_, j := p.call(t, "GET", "/api/jobs?id="+id, key, nil)
			count[fmt.Sprint(j["status"])]++
			if j["status"] == "pending" && j["progress"] == models.SlotWaitNote {
				count["waiting"]++
			}
		}
		return count
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c := statuses()
		if c["waiting"] >= n/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after submitting, %v: want most jobs waiting for a slot with the note %q", c, models.SlotWaitNote)
		}
	}
	time.Sleep(6 * time.Second) // past the deadline of the jobs waiting (and the sweep's grace)
	if c := statuses(); c["failed"] > 0 || c["pending"] < n/2 || c["waiting"] < n/3 {
		t.Fatalf("6 s later: %v: want no job failed and most still waiting", c)
	}
	done, failed, failures := waitAllEnded(t, p, key, ids, 90*time.Second)
	if failed > 0 || done != n {
		t.Fatalf("%d done, %d failed (%v)", done, failed, failures)
	}
	most, prompts := up.figures()
	if most > 2 {
		t.Fatalf("%d calls in flight at once at an upstream with max_concurrency 2", most)
	}
	if len(prompts) != n || up.calls.Load() != n {
		t.Fatalf("%d upstream calls for %d prompts, want one per job (%d)", up.calls.Load(), len(prompts), n)
	}
	// Every generation's start is on /metrics, and the waits for a slot show in it (the later jobs waited
	// seconds).
	req, _ := http.NewRequest("GET", p.base+"/metrics", nil)
	req.Header.Set("X-API-Key", adminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(res.Body)
	res.Body.Close()
	count := regexp.MustCompile(`(?m)^studio_generation_start_seconds_count (\d+)$`).FindSubmatch(text)
	fast := regexp.MustCompile(`(?m)^studio_generation_start_seconds_bucket\{le="1"\} (\d+)$`).FindSubmatch(text)
	if count == nil || string(count[1]) != fmt.Sprint(n) || fast == nil || string(fast[1]) == fmt.Sprint(n) {
		t.Fatalf("studio_generation_start_seconds: count %q, started within 1 s %q: want %d started, some after waiting longer", count, fast, n)
	}
	if up.wrongAuth.Load()+up.badPath.Load() > 0 {
		t.Fatalf("malformed upstream calls: %d wrong key, %d wrong path", up.wrongAuth.Load(), up.badPath.Load())
	}
	_, bal := p.call(t, "GET", "/api/balance", key, nil)
	if got := bal["credits"].(float64); got != 100-n {
		t.Fatalf("credits = %v, want %d (each job charged once)", got, 100-n)
	}
	auditLedger(t, dbURL)
}

// auditLedger checks the credits ledger of the database.
func auditLedger(t *testing.T, dbURL string) {
	t.Helper()
	db, err := models.OpenDB(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	app, err := models.NewApp(context.Background(), db, models.DefaultConfig(), models.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := app.Credits().AuditLedger(context.Background()); err != nil || len(problems) > 0 {
		t.Fatalf("ledger: %v %v", problems, err)
	}
}

// A replica killed with two thousand generations in flight (a thousand synchronous calls waiting on
// their upstream, a thousand tasks submitted to a task protocol and being polled) leaves none behind: the
// replica started after it finishes every one, each task submitted once, each job charged once.
func TestKilledReplicaWithThousandsInFlightFinishesEveryOne(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	direct := newSlowImages(t, time.Second)
	direct.hold() // the calls wait until the replica is killed
	tasks := kling.New()
	t.Cleanup(tasks.Close)
	tasks.SetPolls(1, 1_000_000) // the tasks run until the replica is killed
	dir := t.TempDir()
	ups := filepath.Join(dir, "upstreams.yaml")
	yaml := fmt.Sprintf(`upstreams:
  - {name: img-a, provider: alpha, media: image, family: gen2, protocol: openai, base_url: %s, api_key: k, model: m, soft_timeout: 30s}
  - {name: kolors-a, provider: kuaishou, media: image, family: kolors, protocol: kling, base_url: %s, api_key: %s, secret_key: %s, model: kling-v2-1, soft_timeout: 30s}
`, direct.srv.URL+"/v1", tasks.URL, kling.AccessKey, kling.SecretKey)
	if err := os.WriteFile(ups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey := models.NewAPIKey()
	dbURL := modelstest.URLFor(t)
	env := []string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_UPSTREAMS=" + ups,
		"SERVICE_ADMIN_KEY=" + adminKey, "SERVICE_GENERATE_RATE=100000"}
	a := startStudio(t, env, "serve")
	_, created := a.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 5000})
	key := created["api_key"].(string)
	const n = 1000
	start := time.Now()
	ids := append(submitBatches(t, a, key, "sync", "gen2", n), submitBatches(t, a, key, "task", "kolors", n)...)
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		direct.mu.Lock()
		inFlight := direct.inFlight
		direct.mu.Unlock()
		submitted := len(tasks.Requests(http.MethodPost, "/v1/images/generations"))
		// A task is polled once its submission's answer was recorded: then it is followed, not lost.
		polled := map[string]bool{}
		for _, r := range tasks.Requests(http.MethodGet, "/v1/images/generations/") {
			polled[r.Path] = true
		}
		if inFlight == n && submitted == n && len(polled) == n {
			t.Logf("killing the replica with %d calls in flight and %d tasks submitted and polled, %s after the first submit",
				inFlight, submitted, time.Since(start).Round(100*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica holds %d calls, submitted %d tasks and polled %d, want %d each", inFlight, submitted, len(polled), n)
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	tasks.SetPolls(1, 1) // unfinished tasks end at their next polls
	direct.release()
	b := startStudio(t, env, "serve")
	killed := time.Now()
	done, failed, failures := waitAllEnded(t, b, key, ids, 3*time.Minute)
	if failed > 0 || done != 2*n {
		t.Fatalf("%d done, %d failed (%v)", done, failed, failures[:min(len(failures), 5)])
	}
	t.Logf("all %d ended %s after the next replica started", 2*n, time.Since(killed).Round(100*time.Millisecond))
	if got := len(tasks.Requests(http.MethodPost, "/v1/images/generations")); got != n {
		t.Fatalf("%d task submissions for %d jobs: a task was submitted twice", got, n)
	}
	_, prompts := direct.figures()
	for i := 0; i < n; i++ {
		if prompts[fmt.Sprintf("sync %d", i)] == 0 {
			t.Fatalf("job sync %d was never called", i)
		}
	}
	_, bal := b.call(t, "GET", "/api/balance", key, nil)
	if got := bal["credits"].(float64); got != 5000-2*n {
		t.Fatalf("credits = %v, want %d (each job charged once)", got, 5000-2*n)
	}
	auditLedger(t, dbURL)
}

// queuedImageJobs returns, of ids, the jobs the queue holds a run of (River's image_job rows) and the
// jobs held by a process (their runner column set).
func queuedImageJobs(t *testing.T, dbURL string, ids []string) (queued, held map[string]bool) {
	t.Helper()
	db, err := models.OpenDB(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var args []string
	if err := db.Gorm.Raw("SELECT CAST(args AS TEXT) FROM river_job WHERE kind = ?", "image_job").Scan(&args).Error; err != nil {
		t.Fatal(err)
	}
	var runners []string
	if err := db.Gorm.Raw("SELECT id FROM jobs WHERE runner IS NOT NULL AND id IN ?", ids).Scan(&runners).Error; err != nil {
		t.Fatal(err)
	}
	queued, held = map[string]bool{}, map[string]bool{}
	ofIDs := map[string]bool{}
	for _, id := range ids {
		ofIDs[id] = true
	}
	for _, a := range args {
		var v struct {
			JobID string `json:"job_id"`
		}
		if json.Unmarshal([]byte(a), &v) == nil && ofIDs[v.JobID] {
			queued[v.JobID] = true
		}
	}
	for _, id := range runners {
		held[id] = true
	}
	return queued, held
}

// The replica that accepts a submit holds its jobs from the start: their upstream calls begin without
// a run of the queue (no queued row, the job's runner set in the submit's transaction). A replica that
// is draining queues what it still accepts, and hands back what it holds when its grace ends; another
// replica finishes both, each job charged once.
func TestSubmittedJobsAreHeldFromTheSubmitAndQueuedWhileDraining(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	up := newSlowImages(t, 200*time.Millisecond)
	up.hold()
	dbURL, adminKey, env := slowImagesEnv(t, up, "soft_timeout: 60s",
		"SERVICE_DRAIN_WINDOW=3s", "SERVICE_SHUTDOWN_GRACE=1s", "SERVICE_GENERATE_RATE=100000")
	a := startStudio(t, env, "serve")
	_, created := a.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 100})
	key := created["api_key"].(string)
	const n = 20
	ids := submitBatches(t, a, key, "held", "", n)
	for deadline := time.Now().Add(10 * time.Second); up.calls.Load() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream got %d of %d calls", up.calls.Load(), n)
		}
	}
	queued, held := queuedImageJobs(t, dbURL, ids)
	if len(queued) != 0 || len(held) != n {
		t.Fatalf("accepted by a running replica: %d of %d jobs queued, %d held: want none queued, all held", len(queued), n, len(held))
	}
	// Draining: what the replica still accepts is queued for another one, not held.
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		if status, body := a.call(t, "GET", "/api/ready", "", nil); status == http.StatusServiceUnavailable && body["workers"] == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/api/ready did not answer 503 draining within a second of SIGTERM")
		}
	}
	late := submitBatches(t, a, key, "late", "", 5)
	queued, held = queuedImageJobs(t, dbURL, late)
	for _, id := range late {
		if !queued[id] || held[id] {
			t.Fatalf("job %s accepted while draining: queued %v, held %v: want queued", id, queued[id], held[id])
		}
	}
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("studio exited with %v", err)
	}
	queued, held = queuedImageJobs(t, dbURL, ids)
	if len(queued) != n || len(held) != 0 {
		t.Fatalf("after the grace: %d of %d held jobs queued, %d still held: want all handed back", len(queued), n, len(held))
	}
	up.release()
	b := startStudio(t, env, "serve")
	all := append(ids, late...)
	done, failed, failures := waitAllEnded(t, b, key, all, 60*time.Second)
	if failed > 0 || done != len(all) {
		t.Fatalf("%d done, %d failed (%v)", done, failed, failures)
	}
	_, bal := b.call(t, "GET", "/api/balance", key, nil)
	if got := bal["credits"].(float64); got != float64(100-len(all)) {
		t.Fatalf("credits = %v, want %d (each job charged once)", got, 100-len(all))
	}
	auditLedger(t, dbURL)
}
