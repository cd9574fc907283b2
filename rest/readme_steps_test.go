package rest_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestReadmeFirstSteps runs the README's "First steps" block, as a reader would paste it, with bash,
// curl and jq against a real server with the built-in upstreams: a tenant, an image, a video, a copy
// template and its copy, a platform template and a claim code. Every command of the block must succeed.
func TestReadmeFirstSteps(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed: CI (CI=true) runs the README's first steps with bash, curl and jq", tool)
			}
			t.Skipf("%s is not installed: skipping the README's first steps", tool)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "\n## First steps\n")
	if start < 0 {
		t.Fatal(`README.md has no "First steps" section`)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(text[start:])
	if m == nil {
		t.Fatal(`no sh block in the README's "First steps"`)
	}
	block := m[1]
	if !strings.Contains(block, "localhost:8080") {
		t.Fatalf("the first steps do not talk to localhost:8080 (where the README's server listens):\n%s", block)
	}
	e := newEnv(t) // the built-in upstreams, as `studio serve` starts without SERVICE_UPSTREAMS
	e.skipSpec = true
	script := "set -eo pipefail\n" + strings.ReplaceAll(block, "localhost:8080", strings.TrimPrefix(e.srv.URL, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = append(os.Environ(), "ADMIN_KEY="+e.adminKey)
	out, err := cmd.CombinedOutput()
	t.Logf("first steps:\n%s", out)
	if err != nil {
		t.Fatalf("the README's first steps fail: %v", err)
	}
	for _, want := range []string{`"status": "done"`, `"cdn_url": "http`, `"video_url": "http`, `"hashtags"`, "/claim/promo-"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the first steps' output lacks %q", want)
		}
	}
}
