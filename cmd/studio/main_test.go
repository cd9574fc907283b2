package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"studio/jobs"
	"studio/models"
	"studio/models/modelstest"
)

// TestMain lets the test binary act as the studio binary for the process tests below.
func TestMain(m *testing.M) {
	if os.Getenv("STUDIO_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	modelstest.ExtraMigrations = append(modelstest.ExtraMigrations, jobs.MigrateQueue)
	modelstest.Main(m)
}

// proc is a `studio` process started by a test.
type proc struct {
	cmd  *exec.Cmd
	base string
	log  *bytes.Buffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startStudio runs `studio <args>` with env and waits until /api/health answers.
func startStudio(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startStudioOn(t, freeAddr(t), env, args...)
}

// startStudioOn is startStudio on a given address (a replica restarted where it was).
func startStudioOn(t *testing.T, addr string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "STUDIO_TEST_AS_MAIN=1", "SERVICE_ADDR="+addr), env...)
	p := &proc{cmd: cmd, base: "http://" + addr, log: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("studio output:\n%s", tail(p.log.String(), 4000))
		}
	})
	for i := 0; i < 200; i++ {
		if res, err := http.Get(p.base + "/api/health"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("studio did not become healthy:\n%s", tail(p.log.String(), 4000))
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// call sends a JSON request and decodes the JSON answer.
func (p *proc) call(t *testing.T, method, path, key string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.base+path, rd)
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func TestServeStartsAndShutsDownGracefully(t *testing.T) {
	dir := t.TempDir()
	p := startStudio(t, []string{"DATABASE_URL=sqlite://" + filepath.Join(dir, "studio.db"), "SERVICE_DATA_DIR=" + dir}, "serve")
	if !strings.Contains(p.log.String(), models.KeyPrefix) {
		t.Fatalf("first start did not print the administrator key")
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20 s of SIGTERM")
	}
	if !strings.Contains(p.log.String(), "stopped") {
		t.Fatalf("no clean stop in the log")
	}
}

func TestBadConfigurationExitsWithAClearMessage(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"DATABASE_URL=mysql://x", "DATABASE_URL"},
		{"DATABASE_URL=sqlite://", "sqlite:// needs a file path"},
		{"SERVICE_GENERATE_RATE=lots", "SERVICE_GENERATE_RATE"},
		{"SERVICE_BASE_URL=ftp://x", "SERVICE_BASE_URL"},
	} {
		cmd := exec.Command(os.Args[0], "serve")
		cmd.Env = append(os.Environ(), "STUDIO_TEST_AS_MAIN=1", "SERVICE_DATA_DIR="+t.TempDir(), c.env)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: exit %v, output %q; want non-zero and a message naming %s", c.env, err, out, c.want)
		}
	}
}

func TestAdminSubcommandSharesTheDispatcher(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "admin", "tenant-create", "--name", "Acme", "--credits", "7")
	cmd.Env = append(os.Environ(), "STUDIO_TEST_AS_MAIN=1", "DATABASE_URL=sqlite://"+filepath.Join(dir, "s.db"), "SERVICE_DATA_DIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("studio admin tenant-create: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil || got["ok"] != true || !models.ValidKeyFormat(fmt.Sprint(got["api_key"])) {
		t.Fatalf("output = %s", out)
	}
	cmd = exec.Command(os.Args[0], "admin", "tenant-credit", "--tenant_id", got["tenant"].(map[string]any)["id"].(string))
	cmd.Env = append(os.Environ(), "STUDIO_TEST_AS_MAIN=1", "DATABASE_URL=sqlite://"+filepath.Join(dir, "s.db"), "SERVICE_DATA_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "--credits is required") {
		t.Fatalf("missing flag: %v %s", err, out)
	}
}

func TestServePrintsWhereToStartAndRootRedirectsToSignIn(t *testing.T) {
	dir := t.TempDir()
	p := startStudio(t, []string{"DATABASE_URL=sqlite://" + filepath.Join(dir, "studio.db"), "SERVICE_DATA_DIR=" + dir}, "serve")
	out := p.log.String()
	for _, want := range []string{"Console:  " + p.base + "/login", "GraphQL:  " + p.base + "/graphql",
		"OpenAPI:  " + p.base + "/api/openapi.json", "Health:   " + p.base + "/api/health"} {
		if !strings.Contains(out, want) {
			t.Errorf("start output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "poll only mode") {
		t.Errorf("the queue's informational lines reach the start output:\n%s", out)
	}
	for _, path := range []string{"/login", "/api/openapi.json", "/api/health"} {
		res, err := http.Get(p.base + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s = %d, want 200", path, res.StatusCode)
		}
	}
	res, err := http.Post(p.base+"/graphql", "application/json", strings.NewReader(`{"query":"{__typename}"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("POST /graphql = %d, want 200", res.StatusCode)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = noFollow.Get(p.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/login" {
		t.Errorf("GET / = %d Location %q, want 302 to /login", res.StatusCode, res.Header.Get("Location"))
	}
	res, err = http.Get(p.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "<form") {
		t.Errorf("GET / followed = %d, want the sign-in page:\n%s", res.StatusCode, tail(string(body), 500))
	}
}

func TestServeOnABusyPortFailsBeforeCreatingAnything(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "db", "studio.db")
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Env = append(os.Environ(), "STUDIO_TEST_AS_MAIN=1", "SERVICE_ADDR="+busy.Addr().String(),
		"DATABASE_URL=sqlite://"+dbPath, "SERVICE_DATA_DIR="+filepath.Join(dir, "data"), "SERVICE_ADMIN_KEY=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("serve on a busy port succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "listen on "+busy.Addr().String()) || !strings.Contains(string(out), "SERVICE_ADDR") {
		t.Errorf("output does not say which address is busy and which setting to change:\n%s", out)
	}
	if strings.Contains(string(out), models.KeyPrefix) || strings.Contains(string(out), "shown once") {
		t.Errorf("an administrator key was printed although the server never started:\n%s", out)
	}
	for _, p := range []string{dbPath, filepath.Dir(dbPath), filepath.Join(dir, "data")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after a failed start (stat: %v)", p, err)
		}
	}
}

func TestAdminHelpShowsNoServerFlagsAndActionsLogNoQueueNoise(t *testing.T) {
	cmd := exec.Command(os.Args[0], "admin", "--help")
	cmd.Env = append(os.Environ(), "STUDIO_TEST_AS_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("studio admin --help: %v\n%s", err, out)
	}
	for _, flag := range []string{"--addr", "--workers", "--generate-rate", "--metrics-addr", "--smtp-url", "--oidc-issuer", "--job-deadline", "--base-url"} {
		if strings.Contains(string(out), flag) {
			t.Errorf("studio admin --help lists the server flag %s:\n%s", flag, out)
		}
	}
	for _, flag := range []string{"--database-url", "--data-dir", "--upstreams"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("studio admin --help lacks %s:\n%s", flag, out)
		}
	}
	dir := t.TempDir()
	cmd = exec.Command(os.Args[0], "admin", "upstream-list")
	cmd.Env = append(os.Environ(), "STUDIO_TEST_AS_MAIN=1", "DATABASE_URL=sqlite://"+filepath.Join(dir, "s.db"), "SERVICE_DATA_DIR="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("studio admin upstream-list: %v\n%s", err, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("studio admin upstream-list logged:\n%s", stderr.String())
	}
	if !json.Valid(stdout.Bytes()) {
		t.Errorf("stdout is not the JSON answer:\n%s", stdout.String())
	}
}
