package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

// TestKilledServerLeavesNoJobBehind submits jobs to one process, kills it with SIGKILL while they are
// pending, then starts a second process on the same database: every job ends done or failed-and-refunded,
// and the ledger balances.
func TestKilledServerLeavesNoJobBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 3 * time.Second})
	dir := t.TempDir()
	ups := filepath.Join(dir, "upstreams.yaml")
	yaml := fmt.Sprintf(`upstreams:
  - {name: img-a, provider: alpha, media: image, family: gen2, protocol: openai, base_url: %s, api_key: k, model: m, capabilities: [reference_images, quality], soft_timeout: 20s}
  - {name: chat-a, provider: alpha, media: chat, family: chat, protocol: openai, base_url: %s, api_key: k, model: c, capabilities: [vision]}
`, fake.ChannelURL("img-a"), fake.ChannelURL("chat-a"))
	if err := os.WriteFile(ups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey := models.NewAPIKey()
	dbURL := modelstest.URLFor(t)
	env := []string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_UPSTREAMS=" + ups,
		"SERVICE_ADMIN_KEY=" + adminKey, "SERVICE_JOB_DEADLINE=12s", "SERVICE_GENERATE_RATE=1000"}
	a := startStudio(t, env, "serve")
	_, created := a.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 1000})
	key := created["api_key"].(string)
	const n = 200 // in batches of 32 (the batch limit), all pending when the process dies
	var ids []string
	for len(ids) < n {
		items := make([]map[string]any, min(32, n-len(ids)))
		for i := range items {
			items[i] = map[string]any{"prompt": fmt.Sprintf("job %d", len(ids)+i)}
		}
		status, out := a.call(t, "POST", "/api/generate-batch", key, map[string]any{"items": items})
		if status != 200 {
			t.Fatalf("batch: %d %v", status, out)
		}
		for _, j := range out["jobs"].([]any) {
			ids = append(ids, j.(map[string]any)["jobId"].(string))
		}
	}
	for i := 0; i < 100 && fake.Count("/v1/images/generations") == 0; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	fake.ClearFaults()

	b := startStudio(t, env, "serve")
	deadline := time.Now().Add(60 * time.Second)
	var done, failed int
	for _, id := range ids {
		for {
			_, j := b.call(t, "GET", "/api/jobs?id="+id, key, nil)
			if s := j["status"]; s == "done" || s == "failed" {
				if s == "done" {
					done++
				} else {
					failed++
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s still %v after the restart", id, j["status"])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	_, bal := b.call(t, "GET", "/api/balance", key, nil)
	if got, want := bal["credits"].(float64), float64(1000-done); got != want {
		t.Fatalf("credits = %v, want %v (%d done charged, %d failed refunded)", got, want, done, failed)
	}
	t.Logf("after SIGKILL and restart: %d done, %d failed and refunded", done, failed)
	auditLedger(t, dbURL)
}

// TestCrashedReplicaJobResumedWithinAMinute runs two replicas on one PostgreSQL database. A job whose
// upstream answers slowly runs on the first for longer than River's rescue horizon (its heartbeat keeps it
// from being run twice while alive); then the first replica dies by SIGKILL mid-job, and the second must
// pick the job up and finish it within a minute of the kill (the job deadline is the default 10 minutes).
func TestCrashedReplicaJobResumedWithinAMinute(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dbURL := modelstest.URLFor(t)
	if !strings.HasPrefix(dbURL, "postgres") {
		t.Skip("replicas share a PostgreSQL database: set TEST_DATABASE_URL")
	}
	fake := fakeupstream.New()
	defer fake.Close()
	dir := t.TempDir()
	ups := filepath.Join(dir, "upstreams.yaml")
	yaml := fmt.Sprintf(`upstreams:
  - {name: img-a, provider: alpha, media: image, family: gen2, protocol: openai, base_url: %s, api_key: k, model: m, capabilities: [reference_images, quality], soft_timeout: 120s}
`, fake.ChannelURL("img-a"))
	if err := os.WriteFile(ups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey := models.NewAPIKey()
	env := []string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_UPSTREAMS=" + ups, "SERVICE_ADMIN_KEY=" + adminKey}
	a := startStudio(t, env, "serve")
	_, created := a.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 10})
	key := created["api_key"].(string)
	// The first upstream call takes two minutes: the job is mid-run on the first replica when it dies.
	fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 2 * time.Minute, Times: 1})
	status, out := a.call(t, "POST", "/api/generate", key, map[string]any{"prompt": "a fox"})
	if status != 200 {
		t.Fatalf("generate: %d %v", status, out)
	}
	id := out["jobId"].(string)
	for i := 0; fake.Count("/v1/images/generations") == 0; i++ {
		if i > 200 {
			t.Fatal("the first replica did not start the job")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b := startStudio(t, env, "serve")
	// Past the rescue horizon (15 s) and a rescuer pass (every 30 s): a live job is not run a second time.
	time.Sleep(40 * time.Second)
	if n := fake.Count("/v1/images/generations"); n != 1 {
		t.Fatalf("a live job was run again while its replica was alive: %d upstream calls", n)
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	killed := time.Now()
	for {
		_, j := b.call(t, "GET", "/api/jobs?id="+id, key, nil)
		if j["status"] == "done" {
			break
		}
		if j["status"] == "failed" {
			t.Fatalf("job failed after the crash: %v", j)
		}
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("job still %v %s after the replica died", j["status"], time.Since(killed).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(killed)
	fmt.Printf("crash recovery: job finished %.1f s after its replica was killed (limit 60 s)\n", took.Seconds())
	t.Logf("job finished %s after its replica was killed", took.Round(100*time.Millisecond))
	if n := fake.Count("/v1/images/generations"); n != 2 {
		t.Fatalf("upstream calls = %d, want 2 (the killed run and the rescued one)", n)
	}
	_, bal := b.call(t, "GET", "/api/balance", key, nil)
	if bal["credits"].(float64) != 9 {
		t.Fatalf("credits = %v, want 9 (one job charged once)", bal["credits"])
	}
}
