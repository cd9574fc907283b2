package jobs_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"studio/jobs"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/media"
	"studio/models/modelstest"
)

// slowStore is a local store whose Puts take a while, and that counts how many run at once.
type slowStore struct {
	*media.Local
	parallel int

	mu                sync.Mutex
	inFlight, most, n int
}

func (s *slowStore) ParallelPuts() int { return s.parallel }

func (s *slowStore) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	time.Sleep(150 * time.Millisecond)
	err := s.Local.Put(ctx, key, r, size, contentType)
	s.mu.Lock()
	s.inFlight--
	s.n++
	s.mu.Unlock()
	return err
}

// TestResultsAreStoredAsManyAtOnceAsTheStoreTakes: eight workers whose upstream answers together write
// their results at most ParallelPuts at a time, and every job still ends done.
func TestResultsAreStoredAsManyAtOnceAsTheStoreTakes(t *testing.T) {
	local, err := media.NewLocal(t.TempDir(), "http://media.test")
	if err != nil {
		t.Fatal(err)
	}
	if got := local.ParallelPuts(); got != 16 {
		t.Fatalf("the local store takes %d Puts at once, want 16", got)
	}
	store := &slowStore{Local: local, parallel: 2}

	ctx := context.Background()
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	db := modelstest.NewDB(t)
	cfg := models.DefaultConfig()
	cfg.DatabaseURL, cfg.CDNURL, cfg.AllowPrivateURLs = db.URL, "http://media.test", true
	reg, err := upstream.NewRegistry([]upstream.Config{{Name: "img", Provider: "prov", Media: upstream.MediaImage, Family: "gen2",
		Protocol: upstream.ProtocolOpenAI, BaseURL: fake.ChannelURL("img"), APIKey: "k", Model: "m",
		SoftTimeout: 5 * time.Second, CostUSD: 0.04}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := jobs.New(ctx, db, cfg, jobs.Options{Upstreams: reg, Media: store, MaxWorkers: 8, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	app := svc.App
	credits := int64(100)
	tenant, _, err := app.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Acme", Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	id := &models.Identity{Kind: models.IdentityTenant, TenantID: tenant.ID}
	prompt := "a fox"
	reqs := make([]models.GenerateRequest, 8)
	for i := range reqs {
		reqs[i] = models.GenerateRequest{Prompt: &prompt}
	}
	// Queue all eight before the workers start, so that they are fetched and answered together.
	queued, err := svc.App.Jobs().SubmitImages(ctx, id, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })

	for _, q := range queued {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			j, err := app.Jobs().Job(ctx, q.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.Status == models.JobDone {
				break
			}
			if j.Status == models.JobFailed || time.Now().After(deadline) {
				t.Fatalf("job %s: %s %v", j.ID, j.Status, j.Error)
			}
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.n != 8 || store.most != 2 {
		t.Fatalf("%d results stored, at most %d at once; want 8, at most 2 (and 2 at some point)", store.n, store.most)
	}
}
