package models_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"studio/models"
	"studio/models/modelstest"
)

// submitConcurrently makes n one-job CreateImageJobs calls of id at once. The first transaction is held
// in Enqueue until the other calls have queued behind it, so that they are committed as one batch.
// slowFirstQueue holds the first enqueue 200 ms, so that the submits arriving meanwhile form one batch.
type slowFirstQueue struct{ once sync.Once }

func (q *slowFirstQueue) Enqueue(*gorm.DB, ...models.Work) error {
	q.once.Do(func() { time.Sleep(200 * time.Millisecond) })
	return nil
}

// newBatchingApp returns a core whose queue holds the first enqueue (see slowFirstQueue).
func newBatchingApp(t *testing.T) *models.App {
	t.Helper()
	app, err := models.NewApp(context.Background(), modelstest.NewDB(t), models.DefaultConfig(), models.Deps{Queue: &slowFirstQueue{}})
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	return app
}

func submitConcurrently(t *testing.T, app *models.App, id *models.Identity, n int) (cost int64, errs []error) {
	t.Helper()
	ctx := context.Background()
	prompt := "a fox"
	item, err := app.Jobs().PrepareImage(ctx, id, models.GenerateRequest{Prompt: &prompt})
	if err != nil {
		t.Fatal(err)
	}
	errs = make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := *item
			_, errs[i] = app.Jobs().CreateImageJobs(ctx, id, []*models.PreparedImage{&it})
		}()
	}
	wg.Wait()
	return item.Credits, errs
}

// countOutcomes counts the calls accepted and those refused with kind; any other outcome fails the test.
func countOutcomes(t *testing.T, errs []error, kind models.Kind) (accepted, refused int) {
	t.Helper()
	for i, err := range errs {
		switch {
		case err == nil:
			accepted++
		case models.KindOf(err) == kind:
			refused++
		default:
			t.Fatalf("call %d: %v, want success or %v", i, err, kind)
		}
	}
	return accepted, refused
}

// A batch of submits the balance does not cover as a whole is charged call by call: the calls covered
// are accepted, the others refused for credits, and the balance is spent exactly.
func TestGroupedSubmitsChargedCallByCall(t *testing.T) {
	app := newBatchingApp(t)
	ctx := context.Background()
	prompt := "a fox"
	probe, err := app.Jobs().PrepareImage(ctx, &models.Identity{Kind: models.IdentityTenant}, models.GenerateRequest{Prompt: &prompt})
	if err != nil {
		t.Fatal(err)
	}
	const covered = 5
	id := newTenant(t, app, models.TenantInput{Credits: ptr(covered * probe.Credits)})
	_, errs := submitConcurrently(t, app, id, 16)
	accepted, refused := countOutcomes(t, errs, models.KindInsufficientCredits)
	if accepted != covered || refused != 16-covered {
		t.Fatalf("accepted %d, refused %d; want %d and %d", accepted, refused, covered, 16-covered)
	}
	b, err := app.Credits().Balance(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if b.Credits != 0 {
		t.Fatalf("balance %d after the batch, want 0", b.Credits)
	}
	var jobs int64
	if err := app.DB.Gorm.Model(&models.Job{}).Count(&jobs).Error; err != nil || jobs != covered {
		t.Fatalf("%d jobs stored (%v), want %d", jobs, err, covered)
	}
}

// A batch of submits over the hourly limit accepts the calls within it, in order, and refuses the rest.
func TestGroupedSubmitsRateLimited(t *testing.T) {
	app := newBatchingApp(t)
	app.Config.GenerateRate = 3
	id := newTenant(t, app, models.TenantInput{Credits: ptr(int64(1000))})
	_, errs := submitConcurrently(t, app, id, 10)
	accepted, refused := countOutcomes(t, errs, models.KindRateLimited)
	if accepted != 3 || refused != 7 {
		t.Fatalf("accepted %d, refused %d; want 3 and 7", accepted, refused)
	}
}
