package models_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"studio/models"
)

// Completions of many jobs at once: every job gets its own result, and a job that already ended is left
// as it was.
func TestConcurrentCompletionsKeepEachJobsResult(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	id := newTenant(t, app, models.TenantInput{Credits: ptr(int64(1000))})
	prompt := "a fox"
	var items []*models.PreparedImage
	for i := 0; i < 120; i++ {
		p, err := app.Jobs().PrepareImage(ctx, id, models.GenerateRequest{Prompt: &prompt})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, p)
	}
	jobs, err := app.Jobs().CreateImageJobs(ctx, id, items)
	if err != nil {
		t.Fatal(err)
	}
	// One job ends (failed, refunded) before its worker reports a result.
	if err := app.Jobs().FailJob(ctx, jobs[7].ID, "gave up"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = app.Jobs().CompleteJob(ctx, j, fmt.Sprintf("https://cdn.test/%d.png", i), float64(i)/100, time.Duration(i)*time.Millisecond)
		}()
	}
	wg.Wait()
	for i, j := range jobs {
		if errs[i] != nil {
			t.Fatalf("complete %d: %v", i, errs[i])
		}
		got, err := app.Jobs().Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			if got.Status != models.JobFailed || got.CDNURL != "" {
				t.Fatalf("the ended job changed: %+v", got)
			}
			continue
		}
		if got.Status != models.JobDone || got.CDNURL != fmt.Sprintf("https://cdn.test/%d.png", i) ||
			got.ElapsedMS != int64(i) || fmt.Sprintf("%.2f", got.CostUSD) != fmt.Sprintf("%.2f", float64(i)/100) || got.FinishedAt == nil {
			t.Fatalf("job %d = status %s, cdn %q, elapsed %d, cost %v", i, got.Status, got.CDNURL, got.ElapsedMS, got.CostUSD)
		}
	}
	// Completing again changes nothing.
	if err := app.Jobs().CompleteJob(ctx, jobs[3], "https://cdn.test/other.png", 9, time.Second); err != nil {
		t.Fatal(err)
	}
	if got, _ := app.Jobs().Job(ctx, jobs[3].ID); got.CDNURL != "https://cdn.test/3.png" {
		t.Fatalf("a second completion overwrote the result: %q", got.CDNURL)
	}
	if bad, err := app.Credits().AuditLedger(ctx); err != nil || len(bad) > 0 {
		t.Fatalf("ledger audit: %v %v", bad, err)
	}
}
