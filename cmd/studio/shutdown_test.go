package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

// TestSIGTERMDrainsAndFinishesRunningJobs stops a replica with SIGTERM while it runs jobs whose upstream
// answers slowly: /api/ready answers 503 at once while the listener keeps answering for the drain window,
// the running jobs finish on this replica within the grace, and each upstream call is made once.
func TestSIGTERMDrainsAndFinishesRunningJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 2 * time.Second})
	dir := t.TempDir()
	ups := filepath.Join(dir, "upstreams.yaml")
	yaml := fmt.Sprintf(`upstreams:
  - {name: img-a, provider: alpha, media: image, family: gen2, protocol: openai, base_url: %s, api_key: k, model: m, capabilities: [reference_images, quality], soft_timeout: 60s}
`, fake.ChannelURL("img-a"))
	if err := os.WriteFile(ups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey := models.NewAPIKey()
	dbURL := modelstest.URLFor(t)
	env := []string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_UPSTREAMS=" + ups,
		"SERVICE_ADMIN_KEY=" + adminKey, "SERVICE_DRAIN_WINDOW=1500ms", "SERVICE_SHUTDOWN_GRACE=20s"}
	a := startStudio(t, env, "serve")
	_, created := a.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 100})
	key := created["api_key"].(string)
	const n = 5
	var ids []string
	for i := range n {
		_, out := a.call(t, "POST", "/api/generate", key, map[string]any{"prompt": fmt.Sprintf("job %d", i)})
		ids = append(ids, out["jobId"].(string))
	}
	for deadline := time.Now().Add(20 * time.Second); fake.Count("/v1/images/generations") < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream got %d of %d calls", fake.Count("/v1/images/generations"), n)
		}
	}
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Not ready at once, while the listener still answers requests.
	sawNotReady := false
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !sawNotReady; time.Sleep(10 * time.Millisecond) {
		status, body := a.call(t, "GET", "/api/ready", "", nil)
		sawNotReady = status == http.StatusServiceUnavailable && body["workers"] == "draining"
	}
	if !sawNotReady {
		t.Fatal("/api/ready did not answer 503 draining within a second of SIGTERM")
	}
	if status, _ := a.call(t, "GET", "/api/balance", key, nil); status != http.StatusOK {
		t.Fatalf("a request during the drain window = %d, want 200", status)
	}
	exited := make(chan error, 1)
	go func() { exited <- a.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("studio exited with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("studio did not exit within the grace")
	}
	// The jobs finished before the process ended, each with one upstream call.
	b := startStudio(t, env, "serve")
	for _, id := range ids {
		if _, j := b.call(t, "GET", "/api/jobs?id="+id, key, nil); j["status"] != "done" {
			t.Errorf("job %s is %v after the stop, want done", id, j["status"])
		}
	}
	if got := fake.Count("/v1/images/generations"); got != n {
		t.Fatalf("%d upstream calls for %d jobs", got, n)
	}
}

// TestSIGTERMHandsBackWhatOutlastsTheGrace: a job still running when the shutdown grace ends is handed
// back to the queue, not failed, and another replica finishes it.
func TestSIGTERMHandsBackWhatOutlastsTheGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 5 * time.Second})
	dir := t.TempDir()
	ups := filepath.Join(dir, "upstreams.yaml")
	yaml := fmt.Sprintf(`upstreams:
  - {name: img-a, provider: alpha, media: image, family: gen2, protocol: openai, base_url: %s, api_key: k, model: m, capabilities: [reference_images, quality], soft_timeout: 60s}
`, fake.ChannelURL("img-a"))
	if err := os.WriteFile(ups, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	adminKey := models.NewAPIKey()
	dbURL := modelstest.URLFor(t)
	env := []string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_UPSTREAMS=" + ups,
		"SERVICE_ADMIN_KEY=" + adminKey, "SERVICE_DRAIN_WINDOW=0s", "SERVICE_SHUTDOWN_GRACE=500ms"}
	a := startStudio(t, env, "serve")
	_, created := a.call(t, "POST", "/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Acme", "credits": 100})
	key := created["api_key"].(string)
	_, out := a.call(t, "POST", "/api/generate", key, map[string]any{"prompt": "slow"})
	id := out["jobId"].(string)
	for deadline := time.Now().Add(20 * time.Second); fake.Count("/v1/images/generations") < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the upstream got no call")
		}
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("studio exited with %v", err)
	}
	fake.ClearFaults()
	b := startStudio(t, env, "serve")
	var j map[string]any
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, j = b.call(t, "GET", "/api/jobs?id="+id, key, nil); j["status"] == "done" || j["status"] == "failed" {
			break
		}
	}
	if j["status"] != "done" {
		t.Fatalf("the handed-back job = %v, want done on the next replica", j)
	}
}

// TestLocalMediaReplicasRefuseToRunTogether: with media on local disks, a second replica on the same
// PostgreSQL database refuses to start, naming the settings; it starts when the directory is declared
// shared, and on its own once the first has stopped. A replica restarted after SIGKILL on its own data
// directory starts again at once.
func TestLocalMediaReplicasRefuseToRunTogether(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dbURL := modelstest.URLFor(t)
	if !strings.HasPrefix(dbURL, "postgres") {
		t.Skip("replicas share a PostgreSQL database: set TEST_DATABASE_URL")
	}
	adminKey := models.NewAPIKey()
	env := func(dir string, extra ...string) []string {
		return append([]string{"DATABASE_URL=" + dbURL, "SERVICE_DATA_DIR=" + dir, "SERVICE_ADMIN_KEY=" + adminKey,
			"SERVICE_DRAIN_WINDOW=0s"}, extra...)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startStudio(t, env(dirA), "serve")

	refused := exec.Command(os.Args[0], "serve")
	refused.Env = append(append(os.Environ(), "STUDIO_TEST_AS_MAIN=1", "SERVICE_ADDR="+freeAddr(t)), env(dirB)...)
	out, err := refused.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SERVICE_S3_ENDPOINT") || !strings.Contains(string(out), "SERVICE_MEDIA_SHARED") {
		t.Fatalf("a second replica with local media: %v\n%s", err, tail(string(out), 2000))
	}
	shared := startStudio(t, env(dirB, "SERVICE_MEDIA_SHARED=true"), "serve")
	_ = shared.cmd.Process.Signal(syscall.SIGTERM)
	_ = shared.cmd.Wait()

	// The same replica killed and restarted finds its own row, not a stranger's.
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()
	a = startStudio(t, env(dirA), "serve")
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// Alone now (the first left on SIGTERM): the other directory starts.
	b := startStudio(t, env(dirB), "serve")
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.cmd.Wait()
}
