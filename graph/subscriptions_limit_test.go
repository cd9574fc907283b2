package graph_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// firstFor returns the first message of subscription id, skipping the messages of the others.
func (c *wsClient) firstFor(id string, timeout time.Duration) wsMsg {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m, ok := c.next(time.Until(deadline))
		if !ok {
			c.t.Fatalf("no message for subscription %s within %s (closed %d %q)", id, timeout, c.closeCode, c.closeText)
		}
		if m.ID == id {
			return m
		}
	}
}

// accepted reports whether m is the first state of a subscription (the job's current state), false
// when it is the refusal of the bound per identity; anything else fails the test.
func accepted(t *testing.T, m wsMsg) bool {
	t.Helper()
	p := string(m.Payload)
	switch {
	case isData(m) && strings.Contains(p, `"jobProgress":{`) && !strings.Contains(p, `"errors"`):
		return true
	case strings.Contains(p, `"code":"RATE_LIMITED"`) && strings.Contains(p, "SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY"):
		return false
	}
	t.Fatalf("subscription %s: %s %s, want its first state or the refusal naming SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY", m.ID, m.Type, p)
	return false
}

// TestSubscriptionsPerIdentityAreBounded opens subscriptions of one key over several WebSocket
// connections: past SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY the next is refused, naming the setting;
// completing one, or closing a connection, gives places back; another identity has places of its own.
func TestSubscriptionsPerIdentityAreBounded(t *testing.T) {
	// No workers: the jobs stay pending while they are followed.
	e := newEnv(t, withoutWorkers, setting("SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY", "3"))
	_, keyA := e.tenant("A", 10)
	_, keyB := e.tenant("B", 10)
	jobA := e.generate(keyA, map[string]any{"prompt": "a"})
	jobB := e.generate(keyB, map[string]any{"prompt": "b"})
	follow := func(c *wsClient, id, job string) bool {
		t.Helper()
		c.subscribe(id, progressSubscription, map[string]any{"id": job})
		return accepted(t, c.firstFor(id, 10*time.Second))
	}
	c1 := dial(t, e.srv.URL, transportWS, nil)
	c1.mustInit(map[string]any{"X-API-Key": keyA})
	c2 := dial(t, e.srv.URL, transportWS, nil)
	c2.mustInit(map[string]any{"X-API-Key": keyA})
	for _, s := range []struct {
		c  *wsClient
		id string
	}{{c1, "1"}, {c1, "2"}, {c2, "3"}} {
		if !follow(s.c, s.id, jobA) {
			t.Fatalf("subscription %s of 3 refused", s.id)
		}
	}
	if follow(c2, "4", jobA) {
		t.Fatalf("a 4th subscription was accepted with SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY=3")
	}
	// Another identity is not held back by A's subscriptions.
	cb := dial(t, e.srv.URL, transportWS, nil)
	cb.mustInit(map[string]any{"X-API-Key": keyB})
	if !follow(cb, "b1", jobB) {
		t.Fatalf("tenant B refused because of tenant A's subscriptions")
	}
	// Completing one gives its place back (once its context has ended: retried for a while).
	c1.send(wsMsg{Type: "complete", ID: "1"})
	retry := func(c *wsClient, what string) {
		t.Helper()
		for i := 0; ; i++ {
			if follow(c, fmt.Sprintf("%s-%d", what, i), jobA) {
				return
			}
			if i == 50 {
				t.Fatalf("%s: no place given back", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	retry(c2, "after-complete")
	if follow(c2, "5", jobA) {
		t.Fatalf("a 4th subscription was accepted after one place was given back and taken again")
	}
	// Closing a connection gives back the places of its subscriptions (c1 holds "2").
	_ = c1.conn.Close()
	retry(c2, "after-close")
	if follow(c2, "6", jobA) {
		t.Fatalf("a 4th subscription was accepted after the closed connection's place was taken again")
	}
}
