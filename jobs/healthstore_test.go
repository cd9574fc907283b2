package jobs_test

import (
	"context"
	"testing"
	"time"

	"studio/jobs"
	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/modelstest"
)

// Thousands of alike chat calls are stored in a few rows that count them, and the engine that made
// them counts each once through refreshes (it does not read its own rows back); a restarted process
// reads them all.
func TestAlikeAttemptsShareARowAndAreCountedOnce(t *testing.T) {
	db := modelstest.NewDB(t)
	ctx := context.Background()
	reg, err := upstream.NewRegistry([]upstream.Config{{Name: "chat-a", Provider: "p", Media: upstream.MediaChat,
		Protocol: upstream.ProtocolBuiltin, SoftTimeout: 10 * time.Second, Rating: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	store := jobs.NewHealthStore(db)
	e := routing.NewEngine(reg, routing.Options{Store: store, RefreshInterval: time.Hour})
	const calls = 3000
	for range calls {
		if err := e.Run(ctx, routing.Request{Media: upstream.MediaChat}, nil, func(context.Context, *upstream.Upstream) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var rows, sum int64
	db.Gorm.Model(&models.UpstreamAttempt{}).Count(&rows)
	db.Gorm.Model(&models.UpstreamAttempt{}).Select("COALESCE(SUM(count), 0)").Scan(&sum)
	if sum != calls || rows > 100 {
		t.Errorf("%d calls stored in %d rows counting %d; want every call counted in a few rows", calls, rows, sum)
	}
	attempts := func(e *routing.Engine) int {
		for _, s := range e.List() {
			if s.Name == "chat-a" {
				return s.Attempts
			}
		}
		return -1
	}
	for range 2 {
		if err := e.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got := attempts(e); got != calls {
			t.Fatalf("after a refresh the engine counts %d attempts, want %d", got, calls)
		}
	}
	if got := attempts(routing.NewEngine(reg, routing.Options{Store: store, RefreshInterval: time.Hour})); got != calls {
		t.Errorf("a restarted engine counts %d attempts, want %d", got, calls)
	}
}

// TestIdleReplicasSeeUpstreamChangesWithinASecond: two engines on one database (two replicas); one
// disables an upstream and enables it again while the other routes nothing: the idle one's list shows
// each change within a second.
func TestIdleReplicasSeeUpstreamChangesWithinASecond(t *testing.T) {
	db := modelstest.NewDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg, err := upstream.NewRegistry([]upstream.Config{{Name: "img-a", Provider: "p", Media: upstream.MediaImage, Family: "gen2",
		Protocol: upstream.ProtocolBuiltin, SoftTimeout: 10 * time.Second, Rating: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	busy := routing.NewEngine(reg, routing.Options{Store: jobs.NewHealthStore(db), RefreshInterval: time.Hour})
	idle := routing.NewEngine(reg, routing.Options{Store: jobs.NewHealthStore(db), RefreshInterval: time.Hour})
	go idle.Follow(ctx, jobs.StateFollow)
	state := func() string {
		for _, s := range idle.List() {
			if s.Name == "img-a" {
				return s.State
			}
		}
		return ""
	}
	initial := state()
	within := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > time.Second {
				t.Fatalf("the idle replica did not see %s within a second (state %q)", what, state())
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s seen after %v", what, time.Since(start).Round(time.Millisecond))
	}
	if err := busy.Disable(ctx, "img-a", "maintenance"); err != nil {
		t.Fatal(err)
	}
	within("the disable", func() bool { return state() != initial })
	if err := busy.Enable(ctx, "img-a"); err != nil {
		t.Fatal(err)
	}
	within("the enable", func() bool { return state() == initial })
}
