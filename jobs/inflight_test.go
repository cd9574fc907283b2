package jobs_test

import (
	"context"
	"testing"
	"time"

	"studio/jobs"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/media"
	"studio/models/modelstest"
)

// A submit that committed its jobs held by this process just as the process stopped (after it handed
// back what it held) does not leave them to the rescue pass: Hold hands them back to the queue at once.
func TestJobsHeldAfterTheStopAreHandedBack(t *testing.T) {
	ctx := context.Background()
	db := modelstest.NewDB(t)
	cfg := models.DefaultConfig()
	cfg.DatabaseURL, cfg.CDNURL = db.URL, "http://media.test"
	reg, err := upstream.NewRegistry([]upstream.Config{{Name: "img-a", Provider: "prov-a", Media: upstream.MediaImage,
		Protocol: upstream.ProtocolOpenAI, BaseURL: "http://127.0.0.1:9/v1", APIKey: "k", Model: "m", SoftTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := media.NewLocal(t.TempDir(), cfg.CDNURL)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := jobs.New(ctx, db, cfg, jobs.Options{Upstreams: reg, Media: store, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := svc.Holder()
	if h.Holding() != "" {
		t.Fatal("a process whose workers have not started holds submits")
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runner := h.Holding()
	if runner == "" {
		t.Fatal("a running process holds no submits")
	}
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if h.Holding() != "" {
		t.Fatal("a stopped process still holds submits")
	}
	j := models.Job{ID: "7d4f0c7e-5b1e-4a43-9a55-1a9a8f0f3c01", Kind: models.JobKindImage, Status: models.JobPending,
		Params: []byte(`{"prompt":"late"}`), Deadline: time.Now().Add(time.Hour), Runner: &runner}
	if err := svc.App.DB.Gorm.Create(&j).Error; err != nil {
		t.Fatal(err)
	}
	h.Hold(runner, []*models.Job{&j})
	var still int64
	if err := svc.App.DB.Gorm.Model(&models.Job{}).Where("id = ? AND runner IS NOT NULL", j.ID).Count(&still).Error; err != nil {
		t.Fatal(err)
	}
	var queued int64
	if err := svc.App.DB.Gorm.Raw("SELECT count(*) FROM river_job WHERE kind = ?", "image_job").Scan(&queued).Error; err != nil {
		t.Fatal(err)
	}
	if still != 0 || queued != 1 {
		t.Fatalf("held after the stop: runner still set %v, %d queued runs: want the job handed back to the queue", still == 1, queued)
	}
}
