package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestMain is the package's: every test database also gets the queue's tables.
func TestMain(m *testing.M) {
	modelstest.ExtraMigrations = append(modelstest.ExtraMigrations, jobs.MigrateQueue)
	modelstest.Main(m)
}

// pollAnswer is one scripted answer of GET /v1/videos/{id}: an HTTP status, or a task state.
type pollAnswer struct {
	httpStatus int    // non-zero: answer this error status
	state      string // queued, in_progress, completed, failed
	progress   int
}

// scriptedVideos is an OpenAI Videos API upstream that answers polls from a script (the last answer
// repeats) and serves content as the finished video; it counts starts and cancellations.
type scriptedVideos struct {
	mu       sync.Mutex
	polls    []pollAnswer
	content  []byte
	onStart  func() // called before POST /v1/videos answers
	starts   int
	deletes  int
	polled   int
	lastBody map[string]any
}

func (s *scriptedVideos) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	path := strings.TrimPrefix(r.URL.Path, "/v1/videos")
	switch {
	case r.Method == http.MethodPost && path == "":
		s.mu.Lock()
		s.starts++
		_ = json.NewDecoder(r.Body).Decode(&s.lastBody)
		hook := s.onStart
		s.mu.Unlock()
		if hook != nil {
			hook()
		}
		fmt.Fprint(w, `{"id":"task_1","object":"video","status":"queued","progress":0}`)
	case r.Method == http.MethodDelete:
		s.mu.Lock()
		s.deletes++
		s.mu.Unlock()
		fmt.Fprint(w, `{"id":"task_1","object":"video.deleted","deleted":true}`)
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/content"):
		w.Header().Set("Content-Type", "video/mp4")
		s.mu.Lock()
		_, _ = w.Write(s.content)
		s.mu.Unlock()
	case r.Method == http.MethodGet:
		s.mu.Lock()
		a := s.polls[min(s.polled, len(s.polls)-1)]
		s.polled++
		s.mu.Unlock()
		if a.httpStatus != 0 {
			w.WriteHeader(a.httpStatus)
			fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"server_error","code":null}}`, a.httpStatus)
			return
		}
		fmt.Fprintf(w, `{"id":"task_1","object":"video","status":%q,"progress":%d}`, a.state, a.progress)
	default:
		http.NotFound(w, r)
	}
}

func (s *scriptedVideos) counts() (starts, deletes, polled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts, s.deletes, s.polled
}

// videoEnv is a running queue over a fresh database with one scripted video upstream.
type videoEnv struct {
	t      *testing.T
	app    *models.App
	svc    *jobs.Service
	store  media.Store
	tenant *models.Identity
}

// newVideoEnv starts the queue over a fresh database; the scripted upstream serves tiers (default all).
func newVideoEnv(t *testing.T, up *scriptedVideos, tiers ...string) *videoEnv {
	t.Helper()
	if len(tiers) == 0 {
		tiers = upstream.TierCodes
	}
	ctx := context.Background()
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	db := modelstest.NewDB(t)
	cfg := models.DefaultConfig()
	cfg.DatabaseURL, cfg.JobDeadline, cfg.CDNURL, cfg.AllowPrivateURLs = db.URL, 5*time.Second, "http://media.test", true
	reg, err := upstream.NewRegistry([]upstream.Config{{Name: "vid-s", Provider: "prov-s", Media: upstream.MediaVideo,
		Protocol: upstream.ProtocolOpenAI, BaseURL: srv.URL + "/v1", APIKey: "k", Tiers: tiers,
		Capabilities: []upstream.Capability{upstream.CapImages}, SoftTimeout: 2 * time.Second, CostUSD: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := media.NewLocal(t.TempDir(), cfg.CDNURL)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := jobs.New(ctx, db, cfg, jobs.Options{Upstreams: reg, Media: store, PollInterval: 50 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, VideoPoll: 50 * time.Millisecond, SweepInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	app := svc.App
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	credits := int64(100)
	tenant, _, err := app.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Acme", Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	return &videoEnv{t: t, app: app, svc: svc, store: store, tenant: &models.Identity{Kind: models.IdentityTenant, TenantID: tenant.ID}}
}

// submit queues a 5 s 720p video (10 credits) and returns its task.
func (e *videoEnv) submit() *models.VideoTask {
	e.t.Helper()
	d := 5.0
	prompt := "a fox"
	task, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, models.VideoRequest{Prompt: &prompt, Duration: &d, Resolution: "720p"})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return task
}

// wait returns the task once its status is one of statuses.
func (e *videoEnv) wait(id string, statuses ...models.VideoStatus) *models.VideoTask {
	e.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		task, err := e.app.Videos().VideoTask(context.Background(), id)
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

// spendable returns the tenant's spendable credits.
func (e *videoEnv) spendable() int64 {
	e.t.Helper()
	tenant, err := e.app.Accounts().TenantSettings(context.Background(), e.tenant)
	if err != nil {
		e.t.Fatal(err)
	}
	return tenant.Spendable
}

// expectFailedAndRefunded checks that a task failed with a safe message and its 10 credits came back once.
func (e *videoEnv) expectFailedAndRefunded(task *models.VideoTask) {
	e.t.Helper()
	if task.Status != models.VideoFailed || task.Error == nil || task.RefundedAt == nil || task.VideoURL != "" {
		e.t.Fatalf("task = %s %v refunded %v url %q", task.Status, task.Error, task.RefundedAt, task.VideoURL)
	}
	if strings.Contains(*task.Error, "vid-s") || strings.Contains(*task.Error, "prov-s") || strings.Contains(*task.Error, "scripted") {
		e.t.Fatalf("error names the upstream: %s", *task.Error)
	}
	if got := e.spendable(); got != 100 {
		e.t.Fatalf("spendable = %d, want 100 (refunded)", got)
	}
	if again, err := e.app.Videos().FailVideoTask(context.Background(), task.ID, "again"); err != nil || again {
		e.t.Fatalf("a second failure = %v, %v; want false, nil", again, err)
	}
	if got := e.spendable(); got != 100 {
		e.t.Fatalf("spendable after a second failure = %d, want 100 (refunded once)", got)
	}
}

func TestVideoWorkerPollsThroughFaultsToDone(t *testing.T) {
	up := &scriptedVideos{content: fakeupstream.MP4, polls: []pollAnswer{
		{httpStatus: 500}, {state: "queued"}, {httpStatus: 503}, {state: "in_progress", progress: 40}, {state: "completed", progress: 100}}}
	e := newVideoEnv(t, up)
	task := e.submit()
	if task.Credits != 10 || e.spendable() != 90 {
		t.Fatalf("credits %d, spendable %d; want 10 charged", task.Credits, e.spendable())
	}
	done := e.wait(task.ID, models.VideoDone, models.VideoFailed)
	key := "videos/" + task.CreatedAt.UTC().Format("2006-01-02") + "/" + task.ID + ".mp4"
	if done.Status != models.VideoDone || done.Progress != 100 || done.VideoURL != e.store.URL(key) || done.FinishedAt == nil {
		t.Fatalf("task = %+v", done)
	}
	if done.Upstream != "vid-s" || done.UpstreamTaskID != "task_1" || done.CostUSD != 0.5 {
		t.Fatalf("private record: upstream %q task %q cost %v", done.Upstream, done.UpstreamTaskID, done.CostUSD)
	}
	head, info, err := e.store.ReadHead(context.Background(), key, 64)
	if err != nil || info.ContentType != "video/mp4" || string(head) != string(fakeupstream.MP4) {
		t.Fatalf("stored video: %v %q %q", err, info.ContentType, head)
	}
	if starts, _, polled := up.counts(); starts != 1 || polled != 5 {
		t.Fatalf("starts %d polls %d; want 1 start and 5 polls", starts, polled)
	}
	if up.lastBody["model"] != "vidA-2-0-fast-260801" || up.lastBody["seconds"] != "5" {
		t.Fatalf("upstream got %v", up.lastBody)
	}
	if e.spendable() != 90 {
		t.Fatalf("spendable after done = %d, want 90", e.spendable())
	}
}

func TestVideoWorkerUpstreamFailureRefundsOnce(t *testing.T) {
	cases := []struct {
		name    string
		polls   []pollAnswer
		content []byte
		cancels int
	}{
		{"failed at the upstream", []pollAnswer{{state: "in_progress", progress: 30}, {state: "failed"}}, nil, 0},
		{"task lost at the upstream", []pollAnswer{{httpStatus: 404}}, nil, 0},
		{"result is not a video", []pollAnswer{{state: "completed"}}, []byte("<html>not a video</html>"), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := &scriptedVideos{polls: c.polls, content: c.content}
			e := newVideoEnv(t, up)
			task := e.wait(e.submit().ID, models.VideoFailed, models.VideoDone)
			e.expectFailedAndRefunded(task)
			if _, deletes, _ := up.counts(); deletes != c.cancels {
				t.Fatalf("%d cancellations at the upstream, want %d", deletes, c.cancels)
			}
		})
	}
}

func TestVideoWorkerDeadlineFailsAndCancelsUpstream(t *testing.T) {
	up := &scriptedVideos{polls: []pollAnswer{{state: "in_progress", progress: 10}}}
	e := newVideoEnv(t, up)
	task := e.wait(e.submit().ID, models.VideoFailed, models.VideoDone)
	e.expectFailedAndRefunded(task)
	if !strings.Contains(*task.Error, "timed out") {
		t.Fatalf("error = %s", *task.Error)
	}
	if _, deletes, _ := up.counts(); deletes != 1 {
		t.Fatalf("%d cancellations at the upstream, want 1", deletes)
	}
}

func TestVideoWorkerCancelWhileStartingCancelsUpstream(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	up := &scriptedVideos{polls: []pollAnswer{{state: "in_progress"}}, onStart: func() {
		once.Do(func() { close(arrived) })
		<-release
	}}
	e := newVideoEnv(t, up)
	task := e.submit()
	<-arrived
	cancelled, err := e.svc.App.Videos().CancelVideo(context.Background(), e.tenant, task.ID)
	if err != nil || cancelled.Status != models.VideoCancelled || cancelled.UpstreamTaskID != "" {
		t.Fatalf("cancel = %+v, %v", cancelled, err)
	}
	close(release)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, deletes, _ := up.counts(); deletes == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task started after its cancellation was not cancelled at the upstream")
		}
	}
	got := e.wait(task.ID, models.VideoCancelled)
	if got.UpstreamTaskID != "" || e.spendable() != 100 {
		t.Fatalf("task %+v, spendable %d; want cancelled without an upstream task, refunded", got, e.spendable())
	}
	if _, err := e.svc.App.Videos().CancelVideo(context.Background(), e.tenant, task.ID); models.KindOf(err) != models.KindConflict {
		t.Fatalf("second cancel = %v, want a conflict", err)
	}
	if _, _, polled := up.counts(); polled != 0 {
		t.Fatalf("a cancelled task was polled %d times", polled)
	}
}

func TestVideoAutoMovesToAServedTierOfTheSameCost(t *testing.T) {
	up := &scriptedVideos{content: fakeupstream.MP4, polls: []pollAnswer{{state: "completed"}}}
	e := newVideoEnv(t, up, upstream.TierA20Mini)
	task := e.submit() // auto 720p: the fast tier is cheapest first, but only mini has an upstream
	if task.Model != upstream.TierA20Mini || task.Credits != 10 {
		t.Fatalf("task on %s for %d credits, want %s for 10", task.Model, task.Credits, upstream.TierA20Mini)
	}
	e.wait(task.ID, models.VideoDone)
	d, prompt := 5.0, "x"
	_, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, models.VideoRequest{Prompt: &prompt, Duration: &d, Model: upstream.TierA20Fast})
	if models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("a locked tier without upstream = %v, want %s", err, models.NoUpstreamMessage)
	}
}
