package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"studio/jobs"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/media"
	"studio/models/modelstest"
)

// taskEnv runs the service over a fresh database with the upstreams given, and can stop it and start
// another one on the same database (a replica that stops or crashes, and the one that takes over).
type taskEnv struct {
	t      *testing.T
	db     *models.DB
	cfg    models.Config
	reg    *upstream.Registry
	store  media.Store
	svc    *jobs.Service
	tenant *models.Identity
	hooks  *hookSink
}

// hookSink receives callbacks.
type hookSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func (h *hookSink) received() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.bodies...)
}

func newTaskEnv(t *testing.T, cfgs ...upstream.Config) *taskEnv {
	t.Helper()
	db := modelstest.NewDB(t)
	cfg := models.DefaultConfig()
	cfg.DatabaseURL, cfg.JobDeadline, cfg.CDNURL, cfg.AllowPrivateURLs = db.URL, 20*time.Second, "http://media.test", true
	reg, err := upstream.NewRegistry(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	store, err := media.NewLocal(t.TempDir(), cfg.CDNURL)
	if err != nil {
		t.Fatal(err)
	}
	e := &taskEnv{t: t, db: db, cfg: cfg, reg: reg, store: store, hooks: &hookSink{}}
	e.hooks.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		e.hooks.mu.Lock()
		e.hooks.bodies = append(e.hooks.bodies, m)
		e.hooks.mu.Unlock()
	}))
	t.Cleanup(e.hooks.srv.Close)
	e.start()
	credits := int64(100)
	tenant, _, err := e.svc.App.Accounts().CreateTenant(context.Background(), models.TenantInput{Name: "Acme", Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	e.tenant = &models.Identity{Kind: models.IdentityTenant, TenantID: tenant.ID}
	return e
}

// build makes a service on the environment's database without starting it.
func (e *taskEnv) build() *jobs.Service {
	svc, err := jobs.New(context.Background(), e.db, e.cfg, jobs.Options{Upstreams: e.reg, Media: e.store, PollInterval: 50 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, VideoPoll: 60 * time.Millisecond, SweepInterval: time.Second, ProbeInterval: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	return svc
}

// start builds and starts a service.
func (e *taskEnv) start() {
	e.svc = e.build()
	if err := e.svc.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	svc := e.svc
	e.t.Cleanup(func() { _ = svc.Stop(context.Background()) })
}

// restart stops the service (its work stays queued) and starts another one on the same database.
func (e *taskEnv) restart() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.svc.Stop(ctx); err != nil {
		e.t.Fatalf("stop: %v", err)
	}
	e.start()
}

func (e *taskEnv) image(req models.GenerateRequest) *models.Job {
	e.t.Helper()
	if req.CallbackURL == "" {
		req.CallbackURL = e.hooks.srv.URL
	}
	jobs, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{req})
	if err != nil {
		e.t.Fatalf("submit image: %v", err)
	}
	return jobs[0]
}

func (e *taskEnv) waitJob(id string) *models.Job {
	e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		j, err := e.svc.App.Jobs().Job(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if j.Status != models.JobPending {
			return j
		}
	}
	e.t.Fatalf("job %s did not end in time", id)
	return nil
}

func (e *taskEnv) video(req models.VideoRequest) *models.VideoTask {
	e.t.Helper()
	if req.Duration == nil {
		d := 5.0
		req.Duration = &d
	}
	if req.Resolution == "" {
		req.Resolution = "720p"
	}
	task, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, req)
	if err != nil {
		e.t.Fatalf("submit video: %v", err)
	}
	return task
}

func (e *taskEnv) waitVideo(id string, statuses ...models.VideoStatus) *models.VideoTask {
	e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		task, err := e.svc.App.Videos().VideoTask(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, s := range statuses {
			if task.Status == s {
				return task
			}
		}
	}
	e.t.Fatalf("video task %s did not reach %v in time", id, statuses)
	return nil
}

// waitFor polls cond until it holds.
func (e *taskEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (e *taskEnv) spendable() int64 {
	e.t.Helper()
	tenant, err := e.svc.App.Accounts().TenantSettings(context.Background(), e.tenant)
	if err != nil {
		e.t.Fatal(err)
	}
	return tenant.Spendable
}

// expectDone checks a job ended done with its image in the media store and a callback with studio's URL.
func (e *taskEnv) expectImageDone(j *models.Job) {
	e.t.Helper()
	if j.Status != models.JobDone || !strings.HasPrefix(j.CDNURL, "http://media.test/") {
		e.t.Fatalf("job %s %s %q error %v", j.ID, j.Status, j.CDNURL, j.Error)
	}
	key, ok := e.store.KeyFromURL(j.CDNURL)
	if !ok {
		e.t.Fatalf("cdn_url %s is not the store's", j.CDNURL)
	}
	head, _, err := e.store.ReadHead(context.Background(), key, 16)
	if err != nil || !strings.HasPrefix(string(head), "\x89PNG") {
		e.t.Fatalf("stored result %q: %v", head, err)
	}
	e.waitFor("the callback", func() bool {
		for _, b := range e.hooks.received() {
			if b["job_id"] == j.ID && b["status"] == "done" && b["cdn_url"] == j.CDNURL {
				return true
			}
		}
		return false
	})
}

// expectVideoDone checks a task ended done with its video in the media store.
func (e *taskEnv) expectVideoDone(v *models.VideoTask) {
	e.t.Helper()
	if v.Status != models.VideoDone || !strings.HasPrefix(v.VideoURL, "http://media.test/videos/") || v.Progress != 100 {
		e.t.Fatalf("task %s %s %q progress %d error %v", v.ID, v.Status, v.VideoURL, v.Progress, v.Error)
	}
	key, _ := e.store.KeyFromURL(v.VideoURL)
	if _, info, err := e.store.ReadHead(context.Background(), key, 16); err != nil || info.ContentType != "video/mp4" {
		e.t.Fatalf("stored video: %v %v", info, err)
	}
}

// expectRefunded checks that the failure names no upstream or provider and that every credit is back.
func (e *taskEnv) expectRefunded(msg *string, contains string, names ...string) {
	e.t.Helper()
	e.expectSpendable(100, msg, contains, names...)
}

// expectSpendable checks a failure's message and the credits left.
func (e *taskEnv) expectSpendable(spendable int64, msg *string, contains string, names ...string) {
	e.t.Helper()
	if msg == nil || !strings.Contains(*msg, contains) {
		e.t.Fatalf("error %v, want it to say %q", msg, contains)
	}
	for _, n := range names {
		if strings.Contains(strings.ToLower(*msg), strings.ToLower(n)) {
			e.t.Fatalf("error %q names %q", *msg, n)
		}
	}
	if got := e.spendable(); got != spendable {
		e.t.Fatalf("spendable %d, want %d (refunded)", got, spendable)
	}
}

func ptr[T any](v T) *T { return &v }
