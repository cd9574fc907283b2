package models_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"studio/models"
)

func TestPrepareVideoPicksTiersAndCost(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(100))})
	cases := []struct {
		name       string
		model      string
		resolution string
		duration   float64
		tiers      []string
		res        string
		seconds    int
		credits    int64
	}{
		{"auto without resolution", "", "", 10, []string{"vidA-2-0-pro-260801", "vidA-2-0-fast-260801", "vidA-2-0-mini-260801"}, "480p", 10, 10},
		{"auto 720p", "auto", "720p", 10, []string{"vidA-2-0-fast-260801", "vidA-2-0-mini-260801", "vidA-2-5-pro-260801"}, "720p", 10, 20},
		{"auto 720p past 15 s", "auto", "720p", 16, []string{"vidA-2-5-pro-260801"}, "720p", 16, 32},
		{"locked tier", "vidA-2-0-mini-260801", "", 4.5, []string{"vidA-2-0-mini-260801"}, "480p", 5, 5},
		{"tier B 2K", "", "2k", 15, []string{"vidB-H3"}, "2K", 15, 45},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prompt, d := "x", c.duration
			p, err := app.Videos().PrepareVideo(context.Background(), tenant, models.VideoRequest{Prompt: &prompt, Model: c.model, Resolution: c.resolution, Duration: &d})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Tiers, c.tiers) || p.Tier != c.tiers[0] || p.Resolution != c.res || p.Duration != c.seconds || p.Credits != c.credits {
				t.Fatalf("got tiers %v (%s) %s %d s %d credits, want %v %s %d s %d credits",
					p.Tiers, p.Tier, p.Resolution, p.Duration, p.Credits, c.tiers, c.res, c.seconds, c.credits)
			}
		})
	}
}

func TestVideoTaskEndsAndRefundsOnceUnderConcurrency(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(50))})
	prompt, d := "x", 5.0
	p, err := app.Videos().PrepareVideo(context.Background(), tenant, models.VideoRequest{Prompt: &prompt, Resolution: "1080p", Duration: &d})
	if err != nil {
		t.Fatal(err)
	}
	task, err := app.Videos().CreateVideoTask(context.Background(), tenant, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := pool(t, app, tenant).Spendable; got != 35 {
		t.Fatalf("spendable after submit = %d, want 35", got)
	}
	var ended atomic.Int64
	parallel(10, func(i int) {
		if i%2 == 0 {
			if ok, err := app.Videos().FailVideoTask(context.Background(), task.ID, "upstream failed"); err == nil && ok {
				ended.Add(1)
			}
			return
		}
		if _, err := app.Videos().CancelVideoTask(context.Background(), tenant, task.ID); err == nil {
			ended.Add(1)
		} else if models.KindOf(err) != models.KindConflict {
			t.Errorf("cancel: %v", err)
		}
	})
	if ended.Load() != 1 {
		t.Fatalf("%d callers ended the task, want 1", ended.Load())
	}
	if got := pool(t, app, tenant).Spendable; got != 50 {
		t.Fatalf("spendable = %d, want 50 (refunded once)", got)
	}
	stored, err := app.Videos().VideoTask(context.Background(), task.ID)
	if err != nil || stored.RefundedAt == nil || !stored.Ended() {
		t.Fatalf("stored task %+v, %v", stored, err)
	}
	if ok, err := app.Videos().CompleteVideoTask(context.Background(), task.ID, "https://cdn.example.com/v.mp4", 1); err != nil || ok {
		t.Fatalf("completing an ended task = %v, %v; want false", ok, err)
	}
	assertLedgerSound(t, app)
}
