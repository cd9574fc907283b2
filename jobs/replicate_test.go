package jobs_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/replicate"
	replicatefake "studio/jobs/upstream/replicate/fake"
	"studio/models"
)

// replicateUpstreams are a Replicate image channel (Flux) and a video channel (Seedance) on the fake.
func replicateUpstreams(f *replicatefake.Server, key string) []upstream.Config {
	return []upstream.Config{
		{Name: "flux-r", Provider: "replicate", Media: upstream.MediaImage, Family: "flux", Protocol: replicate.Protocol,
			BaseURL: f.URL, APIKey: key, Model: "black-forest-labs/flux-1.1-pro", SoftTimeout: 2 * time.Second, CostUSD: 0.04},
		{Name: "seedance-r", Provider: "replicate", Media: upstream.MediaVideo, Protocol: replicate.Protocol, BaseURL: f.URL, APIKey: key,
			Model: "bytedance/seedance-1-lite", Tiers: []string{upstream.TierA20Fast}, Capabilities: []upstream.Capability{upstream.CapImages},
			SoftTimeout: 2 * time.Second, CostUSD: 0.036},
	}
}

var replicateNames = []string{"replicate", "flux", "seedance", "bytedance"}

func TestReplicateImageAndVideoEndToEndResumePollingAfterARestart(t *testing.T) {
	f := replicatefake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 1000)
	e := newTaskEnv(t, replicateUpstreams(f, replicatefake.Key)...)
	j := e.image(models.GenerateRequest{Prompt: ptr("a tea cup"), Ratio: "3:4"})
	v := e.video(models.VideoRequest{Prompt: ptr("waves"), Ratio: "16:9", Images: []string{"https://cdn.example/first.png"}})
	e.waitFor("polls of both", func() bool { return len(f.Requests(http.MethodGet, "/v1/predictions/rp")) >= 6 })
	// Progress is the percentage the model prints in its logs.
	e.waitFor("the provider's progress", func() bool { return e.waitVideo(v.ID, models.VideoRunning).Progress >= 10 })
	e.restart()
	f.SetPolls(1, 0)
	e.expectImageDone(e.waitJob(j.ID))
	done := e.waitVideo(v.ID, models.VideoDone, models.VideoFailed)
	e.expectVideoDone(done)
	img := f.Requests(http.MethodPost, "/v1/models/black-forest-labs/flux-1.1-pro/predictions")
	vid := f.Requests(http.MethodPost, "/v1/models/bytedance/seedance-1-lite/predictions")
	if len(img) != 1 || len(vid) != 1 {
		t.Fatalf("%d image and %d video submissions, want 1 each", len(img), len(vid))
	}
	if got := normJSON(t, img[0].Body); got != `{"input":{"aspect_ratio":"3:4","prompt":"a tea cup"}}` {
		t.Fatalf("image submission %s", got)
	}
	if got := normJSON(t, vid[0].Body); got != `{"input":{"aspect_ratio":"16:9","duration":5,"image":"https://cdn.example/first.png","prompt":"waves","resolution":"720p"}}` {
		t.Fatalf("video submission %s", got)
	}
	// Each output was copied once, at once, without the token (the files expire after an hour).
	if dl := f.Requests(http.MethodGet, "/delivery/"); len(dl) != 2 || dl[0].Header.Get("Authorization") != "" {
		t.Fatalf("downloads %v", dl)
	}
	if done.CostUSD != 0.18 {
		t.Fatalf("cost %v, want 5 s at 0.036", done.CostUSD)
	}
}

func TestReplicateVideoCancelCancelsThePrediction(t *testing.T) {
	f := replicatefake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 1000)
	e := newTaskEnv(t, replicateUpstreams(f, replicatefake.Key)...)
	v := e.video(models.VideoRequest{Prompt: ptr("waves")})
	e.waitFor("processing", func() bool { return len(f.Requests(http.MethodGet, "/v1/predictions/rp")) >= 2 })
	running := e.waitVideo(v.ID, models.VideoRunning)
	if _, err := e.svc.App.Videos().CancelVideo(context.Background(), e.tenant, v.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Peek(running.UpstreamTaskID); got.State != faketask.Cancelled {
		t.Fatalf("prediction %s", got.State)
	}
	if c := f.Requests(http.MethodPost, "/v1/predictions/"+running.UpstreamTaskID+"/cancel"); len(c) != 1 || c[0].Header.Get("Authorization") != "Bearer "+replicatefake.Key {
		t.Fatalf("cancel requests %v", c)
	}
	if e.spendable() != 100 {
		t.Fatalf("spendable %d", e.spendable())
	}
}

func TestReplicateRefusalsFailWithTheirRefundAndNoRetry(t *testing.T) {
	f := replicatefake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, replicateUpstreams(f, replicatefake.Key)...)
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("[refuse] a fox")}).ID)
	e.expectRefunded(j.Error, "content moderation", replicateNames...)
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[refuse-output] waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "content moderation", replicateNames...)
	f2 := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[fail] waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(f2.Error, "video generation failed", replicateNames...)
	if n := len(f.Requests(http.MethodPost, "/predictions")); n != 3 {
		t.Fatalf("%d submissions, want 3 (a failed prediction is not run again)", n)
	}
}

func TestReplicateTransientErrorsAreRetriedOnTheSameUpstreamAtMostTwice(t *testing.T) {
	f := replicatefake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, replicateUpstreams(f, replicatefake.Key)...)
	f.Fail(faketask.Fault{Status: 429, RetryAfter: "1", Method: http.MethodPost, Body: replicatefake.ThrottledBody})
	f.Fail(faketask.Fault{Status: 500, Method: http.MethodPost, Body: `{"title":"Internal server error","detail":"oops","status":500}`})
	start := time.Now()
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID))
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the retry came after %s, before the Retry-After of 1 s", took)
	}
	if n := len(f.Requests(http.MethodPost, "/predictions")); n != 3 {
		t.Fatalf("%d submissions, want 3 (429, 500, then accepted)", n)
	}
	f.Fail(faketask.Fault{Status: 503, Method: http.MethodPost, Times: 3, Body: `{"title":"Service unavailable","detail":"down","status":503}`})
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoDone, models.VideoFailed)
	e.expectSpendable(99, v.Error, "credits refunded", replicateNames...) // the image cost 1
	if n := len(f.Requests(http.MethodPost, "/predictions")); n != 6 {
		t.Fatalf("%d submissions, want 3 more", n)
	}
}

func TestReplicateRevokedTokenLeavesRotationUntilAProbeSucceeds(t *testing.T) {
	f := replicatefake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, replicateUpstreams(f, replicatefake.Key)...)
	f.Fail(faketask.Fault{Status: 401, Method: http.MethodPost, Body: `{"title":"Unauthenticated","detail":"You did not pass a valid authentication token","status":401}`})
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "credits refunded", replicateNames...)
	d := 5.0
	if _, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, models.VideoRequest{Prompt: ptr("w"), Duration: &d, Resolution: "720p"}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("a submission while the only upstream is out = %v", err)
	}
	if n, err := e.svc.Engine.ProbeRemoved(context.Background()); n != 1 || err != nil {
		t.Fatalf("probe restored %d, %v", n, err)
	}
	if probes := f.Requests(http.MethodGet, "/v1/account"); len(probes) != 1 {
		t.Fatalf("%d probes", len(probes))
	}
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoDone, models.VideoFailed))

	f.Fail(faketask.Fault{Status: 402, Method: http.MethodPost, Body: `{"title":"Insufficient credit","detail":"You have insufficient credit to run this model.","status":402}`})
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID)
	e.expectSpendable(90, j.Error, "credits refunded", replicateNames...) // the video cost 10
	if _, err := e.svc.Engine.Plan(routing.Request{Media: upstream.MediaImage}); err == nil {
		t.Fatal("the upstream without credit is still in rotation")
	}
}

func TestReplicateNoCapableUpstreamIsRefusedAtSubmit(t *testing.T) {
	f := replicatefake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, replicateUpstreams(f, replicatefake.Key)...)
	if _, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{{Prompt: ptr("x"), ReferenceImages: []string{"https://a.example/x.png"}}}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("reference images on Replicate = %v", err)
	}
	d := 5.0
	if _, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, models.VideoRequest{Prompt: ptr("x"), Duration: &d, Resolution: "720p", GenerateAudio: true}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("generate_audio on Replicate = %v", err)
	}
	if e.spendable() != 100 || len(f.Requests("", "")) != 0 {
		t.Fatalf("spendable %d, %d requests", e.spendable(), len(f.Requests("", "")))
	}
}

func TestReplicateLostSubmissionIsNeverSubmittedAgain(t *testing.T) {
	f := replicatefake.New()
	t.Cleanup(f.Close)
	cfgs := replicateUpstreams(f, replicatefake.Key)
	cfgs[0].SoftTimeout = 500 * time.Millisecond
	e := newTaskEnv(t, cfgs...)
	f.Fail(faketask.Fault{Delay: 3 * time.Second, Method: http.MethodPost})
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID)
	e.expectRefunded(j.Error, "interrupted while it was being submitted", replicateNames...)
	if n := len(f.Requests(http.MethodPost, "/predictions")); n != 1 {
		t.Fatalf("%d submissions, want 1", n)
	}
	if err := e.svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	task := e.video(models.VideoRequest{Prompt: ptr("waves again")})
	if _, err := e.svc.App.Jobs().BeginUpstreamSubmit(context.Background(), task.ID, "video", "seedance-r"); err != nil {
		t.Fatal(err)
	}
	e.start()
	v := e.waitVideo(task.ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "interrupted while it was being submitted", replicateNames...)
	if n := len(f.Requests(http.MethodPost, "/predictions")); n != 1 {
		t.Fatalf("%d submissions, want still 1", n)
	}
}

// TestReadmeUpstreamsReplicateExampleRunsAnImageAndAVideo loads the README's Replicate example (its token
// from the environment) and runs an image and a video through studio against the Replicate fake.
func TestReadmeUpstreamsReplicateExampleRunsAnImageAndAVideo(t *testing.T) {
	f := replicatefake.New()
	t.Cleanup(f.Close)
	t.Setenv("REPLICATE_API_TOKEN", replicatefake.Key)
	e := newTaskEnv(t, readmeExample(t, "replicate", f.URL)...)
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a tea cup"), Model: "flux"}).ID))
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("a kite"), Model: upstream.TierA20Fast, Images: []string{"https://cdn.example/kite.png"}}).ID, models.VideoDone, models.VideoFailed))
	for _, r := range f.Requests(http.MethodPost, "") {
		if r.Header.Get("Authorization") != "Bearer "+replicatefake.Key {
			t.Fatalf("%s sent %q", r.Path, r.Header.Get("Authorization"))
		}
	}
	if n := len(f.Requests(http.MethodPost, "/v1/models/black-forest-labs/flux-1.1-pro/predictions")); n != 1 {
		t.Fatalf("%d image submissions", n)
	}
	if n := len(f.Requests(http.MethodPost, "/v1/models/bytedance/seedance-1-lite/predictions")); n != 1 {
		t.Fatalf("%d video submissions", n)
	}
}
