package models_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"gorm.io/gorm"

	"studio/models"
	"studio/models/modelstest"
)

// recordingDeps records what the core hands to the asynchronous side.
type recordingDeps struct {
	mu     sync.Mutex
	work   []models.Work
	events []string
	models []string
}

func (r *recordingDeps) Enqueue(_ *gorm.DB, work ...models.Work) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.work = append(r.work, work...)
	return nil
}

func (r *recordingDeps) Publish(_ context.Context, topic models.Topic, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, string(topic)+":"+id)
}

func (r *recordingDeps) CheckBinding(model string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.models = append(r.models, model)
	if model != "gen2" {
		return models.Invalid("unknown model family or channel %q", model)
	}
	return nil
}

// The deps given to NewApp receive the work queued with a job, the events of its changes after they
// commit, and the bindings to check.
func TestNewAppCallsItsDeps(t *testing.T) {
	ctx := context.Background()
	deps := &recordingDeps{}
	app, err := models.NewApp(ctx, modelstest.NewDB(t), models.DefaultConfig(), models.Deps{Queue: deps, Events: deps, Bindings: deps})
	if err != nil {
		t.Fatal(err)
	}
	id := newTenant(t, app, models.TenantInput{Credits: ptr(int64(100))})
	prompt := "a fox"
	p, err := app.Jobs().PrepareImage(ctx, id, models.GenerateRequest{Prompt: &prompt})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := app.Jobs().CreateImageJobs(ctx, id, []*models.PreparedImage{p})
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[0]
	if err := app.Jobs().SetJobProgress(ctx, j.ID, "drawing"); err != nil {
		t.Fatal(err)
	}
	deps.mu.Lock()
	work, events := slices.Clone(deps.work), slices.Clone(deps.events)
	deps.mu.Unlock()
	if want := []models.Work{{Kind: models.WorkImage, ID: j.ID}}; !slices.Equal(work, want) {
		t.Errorf("queued %+v, want %+v", work, want)
	}
	if want := []string{"job:" + j.ID, "job:" + j.ID}; !slices.Equal(events, want) {
		t.Errorf("events %v, want %v (created, then progress)", events, want)
	}

	run := func(model string) error {
		body := `{"action":"tenant-bind","tenant_id":"` + id.TenantID + `","model":"` + model + `"}`
		_, err := app.Admin.Run(ctx, models.Operator(), []byte(body))
		return err
	}
	if err := run("gen2"); err != nil {
		t.Fatalf("bind to a known family: %v", err)
	}
	var core *models.Error
	if err := run("nope"); !errors.As(err, &core) || core.Kind != models.KindInvalid {
		t.Fatalf("bind to an unknown family: %v, want invalid", err)
	}
	if want := []string{"gen2", "nope"}; !slices.Equal(deps.models, want) {
		t.Errorf("bindings checked %v, want %v", deps.models, want)
	}
}

// The River kinds of the queue's stored rows are the values of the work kinds: they must not change.
func TestWorkKindsKeepTheirStoredValues(t *testing.T) {
	for kind, want := range map[models.WorkKind]string{models.WorkImage: "image_job", models.WorkCallback: "callback", models.WorkVideoTask: "video_task", models.WorkMail: "mail"} {
		if string(kind) != want {
			t.Errorf("work kind %q, want %q", kind, want)
		}
	}
	if models.TopicJob != "job" || models.TopicVideo != "video" {
		t.Errorf("topics %q, %q, want job, video", models.TopicJob, models.TopicVideo)
	}
}
