package routing

import (
	"context"
	"sync"
	"testing"
	"time"

	"studio/jobs/upstream"
)

// countingStore is a memory store that counts the writes it receives.
type countingStore struct {
	*MemoryHealthStore
	mu     sync.Mutex
	writes int
}

func (c *countingStore) RecordAttempt(ctx context.Context, a Attempt) error {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.MemoryHealthStore.RecordAttempt(ctx, a)
}

func (c *countingStore) RecordAttempts(ctxs []context.Context, as []Attempt) error {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	for i, a := range as {
		if err := c.MemoryHealthStore.RecordAttempt(ctxs[i], a); err != nil {
			return err
		}
	}
	return nil
}

// chatEngine returns an engine over one built-in chat upstream named chat-a.
func chatEngine(t *testing.T, opts Options) *Engine {
	t.Helper()
	reg, err := upstream.NewRegistry([]upstream.Config{{Name: "chat-a", Provider: "p", Media: upstream.MediaChat,
		Protocol: upstream.ProtocolBuiltin, SoftTimeout: 10 * time.Second, Rating: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	return NewEngine(reg, opts)
}

// calls returns a history of n calls: mostly successes over a few latencies, with failures in runs.
func calls(n int) []Attempt {
	out := make([]Attempt, n)
	at := time.Now()
	for i := range out {
		a := Attempt{Upstream: "chat-a", At: at.Add(time.Duration(i) * time.Millisecond), OK: true, LatencyMS: int64(40 + i%7)}
		if i%97 == 5 || i%97 == 6 || i == n-2 {
			a.OK, a.Class, a.LatencyMS = false, "transient", 150
		}
		out[i] = a
	}
	return out
}

// A busy upstream's health is kept in a few grouped records, with exactly the figures of every call:
// attempts, successes, p95 latency and the failures among the last five calls.
func TestHealthOfManyCallsIsGroupedExactly(t *testing.T) {
	e := chatEngine(t, Options{RefreshInterval: time.Hour})
	history := calls(20_000)
	for _, a := range history {
		e.record(context.Background(), a)
	}
	want := computeStats(history)
	if want.RecentFailures != 1 {
		t.Fatalf("the history should end with one failure among its last five calls, got %+v", want)
	}
	en := e.lookup("chat-a")
	if got := *en.stats.Load(); got.Attempts != want.Attempts || got.Successes != want.Successes || got.RecentFailures != want.RecentFailures {
		t.Errorf("stats after recording: got %+v, want %+v", got, want)
	}
	en.mu.Lock()
	records := len(en.attempts)
	en.mu.Unlock()
	if records > 2_000 {
		t.Errorf("%d calls are held in %d records; alike calls of a minute should share one", len(history), records)
	}
	if err := e.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := *en.stats.Load(); got != want {
		t.Errorf("stats after a refresh: got %+v, want %+v", got, want)
	}
}

// Under load the engine writes the attempts of an interval at once, and never reads back its own:
// refreshes (incremental and full) count each call once, and another process's attempts once.
func TestAttemptsAreWrittenInBatchesAndNotReadBack(t *testing.T) {
	store := &countingStore{MemoryHealthStore: NewMemoryHealthStore()}
	e := chatEngine(t, Options{Store: store, RefreshInterval: time.Hour, WriteInterval: 200 * time.Millisecond})
	for i := range 1000 { // over about 100 ms
		e.record(context.Background(), Attempt{Upstream: "chat-a", At: time.Now(), OK: true, LatencyMS: int64(i % 3)})
		if i%20 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	writes := store.writes
	store.mu.Unlock()
	if writes > 3 {
		t.Errorf("1000 attempts recorded within 100 ms took %d writes, want at most 3", writes)
	}
	stored, _ := store.AttemptsSince(context.Background(), time.Time{})
	n := 0
	for _, a := range stored {
		n += a.N()
	}
	if n != 1000 {
		t.Errorf("the store counts %d calls, want 1000", n)
	}
	_ = store.RecordAttempt(context.Background(), Attempt{Upstream: "chat-a", At: time.Now(), OK: false, Class: "other", LatencyMS: 5, Origin: "another"})
	if err := e.Refresh(context.Background()); err != nil { // incremental
		t.Fatal(err)
	}
	if err := e.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := e.lookup("chat-a").stats.Load(); s.Attempts != 1001 || s.Successes != 1000 {
		t.Errorf("after incremental refreshes: %+v, want 1001 attempts and 1000 successes", *s)
	}
	e.opts.FullRefresh = time.Nanosecond
	if err := e.Refresh(context.Background()); err != nil { // full
		t.Fatal(err)
	}
	if s := e.lookup("chat-a").stats.Load(); s.Attempts != 1001 || s.Successes != 1000 || s.RecentFailures != 1 {
		t.Errorf("after a full refresh: %+v, want 1001 attempts, 1000 successes, 1 recent failure", *s)
	}
	// A restarted process reads what the previous one wrote.
	restarted := chatEngine(t, Options{Store: store, RefreshInterval: time.Hour})
	if s := restarted.lookup("chat-a").stats.Load(); s.Attempts != 1001 {
		t.Errorf("after a restart: %d attempts, want 1001", s.Attempts)
	}
}

func TestComputeStatsCountsGroupedCalls(t *testing.T) {
	grouped := []Attempt{
		{LatencyMS: 100, OK: true, Count: 18},
		{LatencyMS: 900, OK: false, Count: 1},
		{LatencyMS: 2000, OK: true, Count: 1},
		{LatencyMS: 50, OK: true, Count: 3},
	}
	s := computeStats(grouped)
	// 23 calls: nearest rank ceil(0.95*23) = 22nd smallest is 900; the last five are 3 successes, then
	// 1 success and the failure.
	if s.Attempts != 23 || s.Successes != 22 || s.P95MS != 900 || s.RecentFailures != 1 {
		t.Errorf("got %+v, want 23 attempts, 22 successes, p95 900, 1 recent failure", s)
	}
}
