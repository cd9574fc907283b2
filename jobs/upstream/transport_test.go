package upstream_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"studio/jobs/upstream"
)

// Under 64 concurrent chat calls the upstream's connections are kept and reused: about one per client
// (a few more when a call starts before the previous call's connection is back). With net/http's
// default of two idle connections per host, every burst closed all but two and dialled again: over
// three times as many connections, each a handshake in the tail of the latency.
func TestConcurrentCallsReuseUpstreamConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(2 * time.Millisecond) // the calls overlap
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	u, err := upstream.New(upstream.Config{Name: "chat", Provider: "alpha", Media: upstream.MediaChat, Protocol: upstream.ProtocolOpenAI,
		BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "m", SoftTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const clients, rounds = 64, 10
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range clients {
		wg.Go(func() {
			for range rounds {
				resp, err := u.Chat().Relay(context.Background(), []byte(`{"model":"service-auto","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d calls failed", failed.Load())
	}
	if n := opened.Load(); n > 2*clients {
		t.Errorf("%d calls by %d concurrent clients opened %d connections to the upstream, want at most %d", clients*rounds, clients, n, 2*clients)
	}
}
