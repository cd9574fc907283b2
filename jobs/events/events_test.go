package events_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"studio/jobs/events"
	"studio/models"
	"studio/models/modelstest"
)

// env is a running broker and the core that publishes to it, built in that order (the core takes the
// broker as its publisher).
type env struct {
	t      *testing.T
	app    *models.App
	broker *events.Broker
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, events.Options{})
}

func newEnvWith(t *testing.T, opts events.Options) *env {
	t.Helper()
	ctx := context.Background()
	db := modelstest.NewDB(t)
	b := events.New(db, opts)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	app, err := models.NewApp(ctx, db, models.DefaultConfig(), models.Deps{Events: b})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, app: app, broker: b}
}

func (e *env) tenant(name string) *models.Identity {
	e.t.Helper()
	credits := int64(100)
	ten, _, err := e.app.Accounts().CreateTenant(context.Background(), models.TenantInput{Name: name, Credits: &credits})
	if err != nil {
		e.t.Fatal(err)
	}
	return &models.Identity{Kind: models.IdentityTenant, TenantID: ten.ID}
}

func (e *env) job(id *models.Identity) *models.Job {
	e.t.Helper()
	ctx := context.Background()
	prompt := "a fox"
	p, err := e.app.Jobs().PrepareImage(ctx, id, models.GenerateRequest{Prompt: &prompt})
	if err != nil {
		e.t.Fatal(err)
	}
	jobs, err := e.app.Jobs().CreateImageJobs(ctx, id, []*models.PreparedImage{p})
	if err != nil {
		e.t.Fatal(err)
	}
	return jobs[0]
}

// next reads the next state of a stream, failing after a few seconds.
func next[T any](t *testing.T, ch <-chan *T) (*T, bool) {
	t.Helper()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-time.After(5 * time.Second):
		t.Fatal("no state within 5 s")
		return nil, false
	}
}

// FollowJob sends the current state, then each change the core publishes, and closes after the job ends;
// a job of another tenant is not found.
func TestFollowJobStreamsItsStatesUntilItEnds(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acme := e.tenant("Acme")
	j := e.job(acme)

	if _, err := e.broker.FollowJob(ctx, e.tenant("Other"), j.ID); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("following another tenant's job: %v, want not found", err)
	}
	ch, err := e.broker.FollowJob(ctx, acme, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := next(t, ch); v.Status != models.JobPending {
		t.Fatalf("first state %+v, want pending", v)
	}
	if err := e.app.Jobs().SetJobProgress(ctx, j.ID, "drawing"); err != nil {
		t.Fatal(err)
	}
	if v, _ := next(t, ch); v.Status != models.JobPending || v.Progress == "" {
		t.Fatalf("second state %+v, want pending with progress", v)
	}
	if err := e.app.Jobs().FailJob(ctx, j.ID, "gave up"); err != nil {
		t.Fatal(err)
	}
	if v, _ := next(t, ch); v.Status != models.JobFailed {
		t.Fatalf("third state %+v, want failed", v)
	}
	if _, ok := next(t, ch); ok {
		t.Fatal("the stream stays open after the job ended")
	}
}

// FollowJobs sends the changes of the jobs the identity may see, and no others.
func TestFollowJobsSeesOnlyItsOwnJobs(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	acme, other := e.tenant("Acme"), e.tenant("Other")
	ch, err := e.broker.FollowJobs(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	e.job(other)
	mine := e.job(acme)
	if v, _ := next(t, ch); v.JobID != mine.ID {
		t.Fatalf("got job %s, want only %s (its own)", v.JobID, mine.ID)
	}
	if n := e.broker.Subscribers(); n != 1 {
		t.Fatalf("%d subscriptions open, want 1", n)
	}
	cancel()
	for deadline := time.Now().Add(5 * time.Second); e.broker.Subscribers() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the subscription is still open after its context ended")
		}
	}
}

// waitHeld waits until the identity holds n subscriptions.
func (e *env) waitHeld(id *models.Identity, n int) {
	e.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); e.broker.Held(id) != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("the identity holds %d subscriptions, want %d", e.broker.Held(id), n)
		}
	}
}

// Every follow of an identity counts against one bound (MaxPerIdentity), whichever method opened it;
// places come back when a stream ends, when its context ends, and are not taken by a refused follow.
func TestSubscriptionsPerIdentityAreBounded(t *testing.T) {
	e := newEnvWith(t, events.Options{MaxPerIdentity: 2})
	acme, other := e.tenant("Acme"), e.tenant("Other")
	j := e.job(acme)
	ctxAll, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	ctx := context.Background()
	if _, err := e.broker.FollowJobs(ctxAll, acme); err != nil {
		t.Fatal(err)
	}
	ch, err := e.broker.FollowJob(ctx, acme, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if models.KindOf(err) != models.KindRateLimited || !strings.Contains(err.Error(), "SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY") {
			t.Fatalf("%s: %v, want rate limited naming SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY", what, err)
		}
	}
	_, err = e.broker.FollowJob(ctx, acme, j.ID)
	refused("third FollowJob", err)
	_, err = e.broker.FollowJobs(ctx, acme)
	refused("third FollowJobs", err)
	// Another identity has places of its own; a follow refused for another reason gives its place back.
	if _, err := e.broker.FollowJob(ctx, other, j.ID); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("another tenant's job: %v, want not found", err)
	}
	if n := e.broker.Held(other); n != 0 {
		t.Fatalf("a refused follow holds %d places", n)
	}
	if _, err := e.broker.FollowJobs(ctxAll, other); err != nil {
		t.Fatalf("another identity: %v", err)
	}
	// The job ends: its stream closes and gives its place back.
	if v, _ := next(t, ch); v.Status != models.JobPending {
		t.Fatalf("first state %+v", v)
	}
	if err := e.app.Jobs().FailJob(ctx, j.ID, "gave up"); err != nil {
		t.Fatal(err)
	}
	for {
		if _, ok := next(t, ch); !ok {
			break
		}
	}
	e.waitHeld(acme, 1)
	// Following a job that already ended sends its last state and holds nothing.
	ended, err := e.broker.FollowJob(ctx, acme, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := next(t, ended); v.Status != models.JobFailed {
		t.Fatalf("ended job: %+v", v)
	}
	if n := e.broker.Held(acme); n != 1 {
		t.Fatalf("following an ended job holds a place: %d held, want 1", n)
	}
	// The context of FollowJobs ends: its place comes back.
	cancelAll()
	e.waitHeld(acme, 0)
	e.waitHeld(other, 0)
}
