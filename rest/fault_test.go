package rest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"studio/jobs/upstream/fakeupstream"
)

func TestHangingUpstreamEndsAtTheDeadline(t *testing.T) {
	srv, fake := fakeUpstreams(t)
	e := newEnv(t, fake, withVar("SERVICE_JOB_DEADLINE", "3s"))
	_, key := e.tenant("Acme", 10)
	srv.SetFault(fakeupstream.Fault{Mode: fakeupstream.Hang})
	start := time.Now()
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x"}).expect(t, 200)
	done := e.waitJob(key, r.str("jobId"))
	took := time.Since(start)
	if done.str("status") != "failed" || !strings.Contains(done.str("error"), "timed out") {
		t.Fatalf("job with a hanging upstream = %s", done.Body)
	}
	if took > 12*time.Second {
		t.Fatalf("job ended after %s, want about its 3 s deadline", took)
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 10 {
		t.Fatalf("credits = %v, want 10 (refunded)", b.num("credits"))
	}
}

func TestCallbackReceiversThatTimeOutOrRedirect(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)

	var slowCalls, redirected, target atomic.Int32
	slow := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slowCalls.Add(1) == 1 {
			time.Sleep(2 * time.Second) // longer than the 500 ms delivery time-out: counted as a failure
		}
		w.WriteHeader(204)
	}))
	tgt := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { target.Add(1); w.WriteHeader(200) }))
	redir := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		http.Redirect(w, r, tgt.URL, http.StatusTemporaryRedirect)
	}))
	a := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "callback_url": slow.URL}).expect(t, 200).str("jobId")
	b := e.call("POST", "/api/generate", key, map[string]any{"prompt": "y", "callback_url": redir.URL}).expect(t, 200).str("jobId")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ja, _ := e.app.Jobs().Job(t.Context(), a)
		jb, _ := e.app.Jobs().Job(t.Context(), b)
		if ja.Callback == "delivered" && jb.Callback == "failed" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	ja, _ := e.app.Jobs().Job(t.Context(), a)
	jb, _ := e.app.Jobs().Job(t.Context(), b)
	if ja.Callback != "delivered" || slowCalls.Load() < 2 {
		t.Fatalf("slow receiver: state %q after %d calls, want delivered on a retry", ja.Callback, slowCalls.Load())
	}
	if jb.Callback != "failed" || redirected.Load() != 4 || target.Load() != 0 {
		t.Fatalf("redirecting receiver: state %q, %d calls, target reached %d times; want failed after 4 attempts, redirect never followed",
			jb.Callback, redirected.Load(), target.Load())
	}
	if !strings.Contains(jb.CallbackErr, "307") {
		t.Fatalf("callback error %q should name the redirect status", jb.CallbackErr)
	}
}

// newTestServer starts an httptest server closed at the end of the test.
func newTestServer(t *testing.T, h http.Handler) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}
