package rest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream/fakeupstream"
	"studio/models/modelstest"
)

// The client compatibility tests drive the clients integrators use (the official OpenAI Node SDK,
// graphql-ws, the Standard Webhooks library) against a real studio on loopback with fake upstreams.
// The scripts in rest/compat are the README's "Use it from your code" snippets; their versions are
// pinned by rest/compat/package-lock.json and installed with npm ci (CI does it first; a test does it
// when node_modules is missing).

// compatDir is the node project of the compatibility scripts.
const compatDir = "compat"

// compatScripts are the scripts the README shows word for word.
var compatScripts = []string{"openai.mjs", "subscription.mjs", "webhook.mjs"}

// requireNode returns the node binary with the scripts' packages installed; without node it skips,
// except in CI (CI=true), where the tests must run.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed: CI (CI=true) runs the client compatibility tests, which need Node.js 20 or later")
		}
		t.Skip("node is not installed: skipping the client compatibility tests (OpenAI SDK, graphql-ws, standardwebhooks); install Node.js 20+ to run them")
	}
	if _, err := os.Stat(filepath.Join(compatDir, "node_modules")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = compatDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in rest/compat (installs the pinned client packages): %v\n%s", err, out)
		}
	}
	return node
}

// runNode runs one compatibility script against the service and returns its output.
func runNode(t *testing.T, node, script string, env map[string]string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = compatDir
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// wantLines fails unless every wanted text is in out.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestOpenAINodeSDK(t *testing.T) {
	node := requireNode(t)
	fake, opt := fakeUpstreams(t)
	fake.SetStream(3, 0)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	out, errOut, err := runNode(t, node, "openai.mjs", map[string]string{"STUDIO_URL": e.srv.URL, "STUDIO_API_KEY": key})
	if err != nil {
		t.Fatalf("openai.mjs: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("openai.mjs:\n%s", out)
	wantLines(t, out,
		"chat: fake reply | tokens: 15 | request: ", // the upstream's usage; _request_id read from X-Request-ID
		"stream: chunk-0 chunk-1 chunk-2  | tokens: ",
		"model: service-auto\nmodel: chat\n",
		"error: 400 model_not_found model ", // OpenAI.BadRequestError with OpenAI's code and the field at fault
	)
	if strings.Contains(out, "request: undefined") || strings.Contains(out, "tokens: undefined") {
		t.Fatalf("the SDK found no request id or usage:\n%s", out)
	}
	leaks(t, []byte(out))
}

func TestGraphQLWSNodeClient(t *testing.T) {
	node := requireNode(t)
	fake, opt := fakeUpstreams(t)
	fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: time.Second}) // the job is seen pending first
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 10)
	out, errOut, err := runNode(t, node, "subscription.mjs", map[string]string{"STUDIO_URL": e.srv.URL, "STUDIO_API_KEY": key})
	if err != nil {
		t.Fatalf("subscription.mjs: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("subscription.mjs:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if first := strings.Fields(lines[0]); len(lines) < 2 || len(first) < 3 || first[2] != "pending" {
		t.Fatalf("the subscription did not start with the pending job:\n%s", out)
	}
	last := strings.Fields(lines[len(lines)-1])
	if len(last) != 4 || last[0] != "job:" || last[2] != "done" || !strings.HasPrefix(last[3], "http") {
		t.Fatalf("the subscription did not follow the job to done:\n%s", out)
	}
	if j, err := e.app.Jobs().Job(t.Context(), last[1]); err != nil || j.Status != "done" {
		t.Fatalf("job %s: %v %+v", last[1], err, j)
	}
}

func TestStandardWebhooksNodeVerifiesCallbacks(t *testing.T) {
	node := requireNode(t)
	_, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	tid, key := e.tenant("Acme", 10)
	tenant, err := e.app.Accounts().TenantSettings(t.Context(), modelstest.Tenant(tid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"STUDIO_URL": e.srv.URL, "STUDIO_API_KEY": key, "STUDIO_CALLBACK_SECRET": tenant.CallbackSecret}
	out, errOut, err := runNode(t, node, "webhook.mjs", env)
	if err != nil {
		t.Fatalf("webhook.mjs: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("webhook.mjs:\n%s", out)
	wantLines(t, out, "submitted: ", " done http")
	jobID := strings.Fields(out[strings.Index(out, "submitted: "):])[1]
	wantLines(t, out, "callback: "+jobID+" done ")
	// Another secret does not verify: the library refuses the callback.
	env["STUDIO_CALLBACK_SECRET"] = "whsec_" + base64.StdEncoding.EncodeToString([]byte("not the tenant's secret!"))
	out, errOut, err = runNode(t, node, "webhook.mjs", env)
	if err == nil || !strings.Contains(errOut, "refused:") {
		t.Fatalf("a callback verified with the wrong secret: %v\n%s\n%s", err, out, errOut)
	}
}

// TestReadmeShowsTheCompatScripts: the README's "Use it from your code" snippets are the scripts the
// tests above run, word for word.
func TestReadmeShowsTheCompatScripts(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("## Use it from your code")) {
		t.Fatal(`README.md has no "Use it from your code" section`)
	}
	for _, name := range compatScripts {
		script, err := os.ReadFile(filepath.Join(compatDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(readme, script) {
			t.Errorf("README.md does not show rest/compat/%s word for word", name)
		}
	}
}

// TestWebhookScriptSaysWhyASubmitIsRefused: run against a service with its default settings (private
// callback addresses refused), the webhook snippet stops at once with the server's answer, which names
// SERVICE_ALLOW_PRIVATE_URLS, instead of waiting forever for a callback that never comes.
func TestWebhookScriptSaysWhyASubmitIsRefused(t *testing.T) {
	node := requireNode(t)
	_, opt := fakeUpstreams(t)
	e := newEnv(t, opt, withVar("SERVICE_ALLOW_PRIVATE_URLS", "false"))
	tid, key := e.tenant("Acme", 10)
	tenant, err := e.app.Accounts().TenantSettings(t.Context(), modelstest.Tenant(tid))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "webhook.mjs")
	cmd.Dir = compatDir
	cmd.Env = append(os.Environ(), "STUDIO_URL="+e.srv.URL, "STUDIO_API_KEY="+key, "STUDIO_CALLBACK_SECRET="+tenant.CallbackSecret)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("webhook.mjs still waits for a callback after its submit was refused:\n%s\n%s", out.String(), errOut.String())
	}
	if err == nil || !strings.Contains(errOut.String(), "submit refused: 400 invalid") || !strings.Contains(errOut.String(), "SERVICE_ALLOW_PRIVATE_URLS") {
		t.Fatalf("webhook.mjs did not report the refused submit: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	if strings.Contains(out.String(), "submitted:") {
		t.Fatalf("webhook.mjs claims a submission:\n%s", out.String())
	}
}
