package pglisten_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"studio/models/pglisten"
)

// serverURL returns TEST_DATABASE_URL when it names a PostgreSQL server, else skips the test.
func serverURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("TEST_DATABASE_URL")
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		t.Skip("PostgreSQL test: set TEST_DATABASE_URL=postgres://... to run it")
	}
	return u
}

// recorder is a channel's handler that records what the listener hands it.
type recorder struct {
	payloads  chan string
	connected atomic.Int32
	lost      atomic.Int32
}

func newRecorder() *recorder { return &recorder{payloads: make(chan string, 16)} }

func (r *recorder) handler() pglisten.Handler {
	return pglisten.Handler{
		Notify:    func(n *pgconn.Notification) { r.payloads <- n.Payload },
		Connected: func(context.Context) { r.connected.Add(1) },
		Lost:      func() { r.lost.Add(1) },
	}
}

// expect waits for payload on the recorder.
func (r *recorder) expect(t *testing.T, payload string) {
	t.Helper()
	select {
	case got := <-r.payloads:
		if got != payload {
			t.Fatalf("payload %q, want %q", got, payload)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no notification %q within 5 s", payload)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// admin is a plain connection for NOTIFY and pg_stat_activity.
func admin(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func notify(t *testing.T, c *pgx.Conn, channel, payload string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		t.Fatal(err)
	}
}

// channelName is unique to the test run: every test process shares TEST_DATABASE_URL's database here.
func channelName(name string) string {
	return fmt.Sprintf("pglisten_%s_%d_%d", name, os.Getpid(), time.Now().UnixNano())
}

// TestOneConnectionListensOnEveryChannelAndComesBack registers two channels, then kills the listener's
// connection: it connects again, each handler sees Lost and then Connected, and notifications of both
// channels arrive again, on one connection all along.
func TestOneConnectionListensOnEveryChannelAndComesBack(t *testing.T) {
	dsn := serverURL(t)
	db := admin(t, dsn)
	a, b := channelName("a"), channelName("b")
	ra, rb := newRecorder(), newRecorder()
	l := pglisten.New(pglisten.ConnectDSN(dsn), pglisten.Options{})
	l.Handle(a, ra.handler())
	l.Handle(b, rb.handler())
	release := l.Start()
	select {
	case <-l.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not become ready")
	}
	if !l.Listening() || ra.connected.Load() != 1 || rb.connected.Load() != 1 {
		t.Fatalf("listening %v, connected %d %d, want true 1 1", l.Listening(), ra.connected.Load(), rb.connected.Load())
	}
	notify(t, db, a, "one")
	notify(t, db, b, "two")
	ra.expect(t, "one")
	rb.expect(t, "two")
	var conns int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1 AND pid = $2`, pglisten.ApplicationName, int32(l.PID())).Scan(&conns); err != nil || conns != 1 {
		t.Fatalf("listener connections %d (%v), want 1", conns, err)
	}

	first := l.PID()
	if _, err := db.Exec(context.Background(), "SELECT pg_terminate_backend($1)", int32(first)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "connected again", func() bool { return ra.connected.Load() == 2 && rb.connected.Load() == 2 && l.Listening() })
	if ra.lost.Load() != 1 || rb.lost.Load() != 1 {
		t.Fatalf("lost %d %d, want 1 1", ra.lost.Load(), rb.lost.Load())
	}
	if l.PID() == first {
		t.Fatal("the same backend after it was terminated")
	}
	notify(t, db, b, "three")
	notify(t, db, a, "four")
	rb.expect(t, "three")
	ra.expect(t, "four")

	release()
	if l.Listening() || ra.lost.Load() != 2 || rb.lost.Load() != 2 {
		t.Fatalf("after release: listening %v, lost %d %d, want false 2 2", l.Listening(), ra.lost.Load(), rb.lost.Load())
	}
	waitFor(t, "the connection closed", func() bool {
		var n int
		_ = db.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(first)).Scan(&n)
		return n == 0
	})
}

// TestAHandlerAddedLaterIsListenedToo adds a channel while the listener runs: it connects again so that
// the new channel is listened and every handler sees Connected.
func TestAHandlerAddedLaterIsListenedToo(t *testing.T) {
	dsn := serverURL(t)
	db := admin(t, dsn)
	a, b := channelName("a"), channelName("b")
	ra, rb := newRecorder(), newRecorder()
	l := pglisten.New(pglisten.ConnectDSN(dsn), pglisten.Options{})
	l.Handle(a, ra.handler())
	release := l.Start()
	defer release()
	waitFor(t, "listening", l.Listening)
	remove := l.Handle(b, rb.handler())
	waitFor(t, "the new channel listened", func() bool { return rb.connected.Load() == 1 && l.Listening() })
	if ra.connected.Load() != 2 || ra.lost.Load() != 1 {
		t.Fatalf("the first handler: connected %d, lost %d, want 2 1", ra.connected.Load(), ra.lost.Load())
	}
	notify(t, db, b, "late")
	rb.expect(t, "late")
	remove()
	notify(t, db, b, "removed")
	notify(t, db, a, "still")
	ra.expect(t, "still")
	select {
	case p := <-rb.payloads:
		t.Fatalf("a removed handler received %q", p)
	default:
	}
}

// TestHoldersShareOneRun: the listener runs while any holder holds it, and runs again after the last
// one released it.
func TestHoldersShareOneRun(t *testing.T) {
	dsn := serverURL(t)
	r := newRecorder()
	l := pglisten.New(pglisten.ConnectDSN(dsn), pglisten.Options{})
	l.Handle(channelName("a"), r.handler())
	one, two := l.Start(), l.Start()
	waitFor(t, "listening", l.Listening)
	one()
	one() // counts once
	if !l.Listening() {
		t.Fatal("stopped while a holder still holds it")
	}
	two()
	if l.Listening() || r.lost.Load() != 1 {
		t.Fatalf("after the last release: listening %v, lost %d", l.Listening(), r.lost.Load())
	}
	again := l.Start()
	defer again()
	waitFor(t, "listening again", func() bool { return l.Listening() && r.connected.Load() == 2 })
}

// TestFailedAttemptsBackOff: a server that cannot be reached is tried again with growing pauses, up to
// RetryMax, and Stop ends the attempts.
func TestFailedAttemptsBackOff(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	l := pglisten.New(func(context.Context) (*pgx.Conn, error) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return nil, errors.New("unreachable")
	}, pglisten.Options{RetryMin: 20 * time.Millisecond, RetryMax: 160 * time.Millisecond})
	l.Handle("anything", pglisten.Handler{})
	release := l.Start()
	time.Sleep(time.Second)
	release()
	mu.Lock()
	got := slices.Clone(at)
	mu.Unlock()
	// Pauses 20, 40, 80, 160, 160, ... ms: 300 ms for the first five, then one every 160 ms.
	if len(got) < 5 || len(got) > 10 {
		t.Fatalf("%d attempts in a second, want 5 to 10", len(got))
	}
	for i := 2; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap < 10*time.Millisecond || gap > 400*time.Millisecond {
			t.Fatalf("pause %d was %s", i, gap)
		}
	}
	if l.Listening() {
		t.Fatal("listening without a connection")
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(at) != len(got) {
		t.Fatal("attempts went on after the release")
	}
}
