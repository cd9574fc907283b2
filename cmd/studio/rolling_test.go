package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	arkfake "studio/jobs/upstream/ark/fake"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

// balancer is a round-robin reverse proxy over replicas that, like nginx's proxy_next_upstream error,
// passes a request to the next replica when a replica refuses the connection (it is restarting).
type balancer struct {
	mu       sync.Mutex
	backends []string
	next     int
	client   *http.Client
	retries  atomic.Int64
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	start := b.next
	b.next++
	backends := append([]string(nil), b.backends...)
	b.mu.Unlock()
	var last error
	for i := range len(backends) * 2 {
		base := backends[(start+i)%len(backends)]
		req, _ := http.NewRequest(r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		res, err := b.client.Do(req)
		if err != nil {
			// Refused, or the connection closed before an answer: the next replica (every POST of the
			// load carries an Idempotency-Key, so a request that did arrive is not made twice).
			last = err
			b.retries.Add(1)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
		res.Body.Close()
		return
	}
	http.Error(w, "balancer: no replica answered: "+last.Error(), http.StatusBadGateway)
}

// TestRollingRestartUnderLoad runs three replicas on one PostgreSQL database behind a balancer that
// retries refused connections, sends a steady load of job submissions and reads, and restarts every
// replica in turn with SIGTERM: no request fails, every job ends done, and the upstream is called once
// per job.
func TestRollingRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dbURL := modelstest.URLFor(t)
	if !strings.HasPrefix(dbURL, "postgres") {
		t.Skip("replicas share a PostgreSQL database: set TEST_DATABASE_URL")
	}
	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 300 * time.Millisecond})
	dir := t.TempDir()
	ups := filepath.Join(dir, "upstreams.yaml")
	yaml := fmt.Sprintf(`upstreams:
  - {name: img-a, provider: alpha, media: image, family: gen2, protocol: openai, base_url: %s, api_key: k, model: m, capabilities: [reference_images, quality], soft_timeout: 60s}
`, fake.ChannelURL("img-a"))
	if err := os.WriteFile(ups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey := models.NewAPIKey()
	// One data directory for the three (one host): media shared as a network file system would be.
	env := []string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_UPSTREAMS=" + ups, "SERVICE_ADMIN_KEY=" + adminKey,
		"SERVICE_GENERATE_RATE=100000", "SERVICE_DRAIN_WINDOW=1s", "SERVICE_SHUTDOWN_GRACE=15s", "SERVICE_DB_MAX_CONNS=20"}
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	replicas := make([]*proc, len(addrs))
	lb := &balancer{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	for i, a := range addrs {
		replicas[i] = startStudioOn(t, a, env, "serve")
		lb.backends = append(lb.backends, replicas[i].base)
	}
	front := httptest.NewServer(lb)
	defer front.Close()
	entry := &proc{base: front.URL}
	_, created := entry.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 100000})
	key := created["api_key"].(string)

	var (
		mu       sync.Mutex
		jobs     []string
		failures []string
		requests atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var req *http.Request
				if i%2 == 0 {
					body := fmt.Sprintf(`{"prompt":"load %d-%d"}`, c, i)
					req, _ = http.NewRequest("POST", front.URL+"/api/generate", strings.NewReader(body))
					req.Header.Set("Idempotency-Key", fmt.Sprintf("load-%d-%d", c, i))
				} else {
					req, _ = http.NewRequest("GET", front.URL+"/api/jobs?limit=5", nil)
				}
				req.Header.Set("X-API-Key", key)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				requests.Add(1)
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				raw, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %s: %d %s", req.Method, req.URL.Path, res.StatusCode, raw))
					mu.Unlock()
					continue
				}
				if req.Method == "POST" {
					if id := jsonField(raw, "jobId"); id != "" {
						mu.Lock()
						jobs = append(jobs, id)
						mu.Unlock()
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(time.Second)
	for i, a := range addrs {
		if err := replicas[i].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := replicas[i].cmd.Wait(); err != nil {
			t.Fatalf("replica %d exited with %v:\n%s", i, err, tail(replicas[i].log.String(), 3000))
		}
		replicas[i] = startStudioOn(t, a, env, "serve")
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed during the rolling restart; first: %s", len(failures), requests.Load(), failures[0])
	}
	for _, id := range unique(jobs) {
		var status any
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			_, j := entry.call(t, "GET", "/api/jobs?id="+id, key, nil)
			if status = j["status"]; status == "done" || status == "failed" {
				break
			}
		}
		if status != "done" {
			t.Fatalf("job %s ended %v", id, status)
		}
	}
	if calls, n := fake.Count("/v1/images/generations"), len(unique(jobs)); calls != n {
		t.Fatalf("%d upstream calls for %d jobs: a job was run twice", calls, n)
	}
	t.Logf("rolling restart of 3 replicas under load: %d requests, 0 failed, %d jobs done, %d upstream calls, %d connections retried by the balancer",
		requests.Load(), len(unique(jobs)), fake.Count("/v1/images/generations"), lb.retries.Load())
}

func jsonField(raw []byte, name string) string {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return ""
	}
	s, _ := m[name].(string)
	return s
}

func unique(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// TestKilledReplicaTaskResumedElsewhereSubmittedOnce runs two replicas on one PostgreSQL database with
// an Ark (task) video upstream; while the task is being polled one replica dies by SIGKILL: the other
// finishes the video within a minute, polling the same upstream task, which was submitted once.
func TestKilledReplicaTaskResumedElsewhereSubmittedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dbURL := modelstest.URLFor(t)
	if !strings.HasPrefix(dbURL, "postgres") {
		t.Skip("replicas share a PostgreSQL database: set TEST_DATABASE_URL")
	}
	f := arkfake.New()
	defer f.Close()
	f.SetPolls(1, 1000) // runs until told to finish
	dir := t.TempDir()
	ups := filepath.Join(dir, "upstreams.yaml")
	yaml := fmt.Sprintf(`upstreams:
  - {name: seedance-a, provider: volcengine, media: video, protocol: ark, base_url: %s, api_key: %s, model: doubao-seedance-1-5-pro-251215, tiers: [%s], soft_timeout: 30s}
`, f.URL, arkfake.Key, "vidA-2-0-fast-260801")
	if err := os.WriteFile(ups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey := models.NewAPIKey()
	env := []string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_UPSTREAMS=" + ups, "SERVICE_ADMIN_KEY=" + adminKey,
		"SERVICE_ALLOW_PRIVATE_URLS=true"}
	a := startStudio(t, env, "serve")
	b := startStudio(t, env, "serve")
	_, created := a.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 1000})
	key := created["api_key"].(string)
	status, v := a.call(t, "POST", "/api/videos", key, map[string]any{"prompt": "waves", "model": "vidA-2-0-fast-260801", "duration": 5})
	if status != 200 {
		t.Fatalf("video: %d %v", status, v)
	}
	id := v["id"].(string)
	polls := func() int { return len(f.Requests(http.MethodGet, "/contents/generations/tasks/cgt-")) }
	for deadline := time.Now().Add(30 * time.Second); polls() < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the task was never polled")
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	killed := time.Now()
	f.SetPolls(1, 0)
	var task map[string]any
	for time.Since(killed) < 60*time.Second {
		if _, task = b.call(t, "GET", "/api/videos?id="+id, key, nil); task["status"] == "done" || task["status"] == "failed" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if task["status"] != "done" {
		t.Fatalf("the video after the kill = %v, want done within a minute", task)
	}
	if n := len(f.Requests(http.MethodPost, "/contents/generations/tasks")); n != 1 {
		t.Fatalf("%d submissions to the provider, want 1", n)
	}
	t.Logf("video done %v after the kill, submitted once", time.Since(killed).Round(100*time.Millisecond))
}
