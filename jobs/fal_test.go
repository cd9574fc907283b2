package jobs_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fal"
	falfake "studio/jobs/upstream/fal/fake"
	"studio/models"
)

// falUpstreams are a fal image channel (FLUX dev) and an image-to-video channel (Seedance) on the fake.
func falUpstreams(f *falfake.Server, key string) []upstream.Config {
	return []upstream.Config{
		{Name: "flux-f", Provider: "fal", Media: upstream.MediaImage, Family: "flux", Protocol: fal.Protocol,
			BaseURL: f.URL, APIKey: key, Model: "fal-ai/flux/dev", SoftTimeout: 2 * time.Second, CostUSD: 0.025},
		{Name: "seedance-f", Provider: "fal", Media: upstream.MediaVideo, Protocol: fal.Protocol, BaseURL: f.URL, APIKey: key,
			Model: "fal-ai/bytedance/seedance/v1/lite/text-to-video", Tiers: []string{upstream.TierA20Fast}, SoftTimeout: 2 * time.Second, CostUSD: 0.036},
	}
}

var falNames = []string{"fal", "flux", "seedance", "bytedance"}

func TestFalImageAndVideoEndToEndResumePollingAfterARestart(t *testing.T) {
	f := falfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 1000)
	e := newTaskEnv(t, falUpstreams(f, falfake.Key)...)
	j := e.image(models.GenerateRequest{Prompt: ptr("a tea cup"), Ratio: "3:4"})
	v := e.video(models.VideoRequest{Prompt: ptr("waves"), Ratio: "16:9"})
	e.waitFor("polls of both", func() bool { return len(f.Requests(http.MethodGet, "/status?logs=1")) >= 6 })
	e.waitFor("the runner's progress", func() bool { return e.waitVideo(v.ID, models.VideoRunning).Progress >= 10 })
	e.restart()
	f.SetPolls(1, 0)
	e.expectImageDone(e.waitJob(j.ID))
	done := e.waitVideo(v.ID, models.VideoDone, models.VideoFailed)
	e.expectVideoDone(done)
	img := f.Requests(http.MethodPost, "/fal-ai/flux/dev")
	vid := f.Requests(http.MethodPost, "/fal-ai/bytedance/seedance/v1/lite/text-to-video")
	if len(img) != 1 || len(vid) != 1 {
		t.Fatalf("%d image and %d video submissions, want 1 each", len(img), len(vid))
	}
	if got := normJSON(t, img[0].Body); got != `{"image_size":{"height":1024,"width":768},"num_images":1,"prompt":"a tea cup"}` {
		t.Fatalf("image submission %s", got)
	}
	if got := normJSON(t, vid[0].Body); got != `{"aspect_ratio":"16:9","duration":"5","prompt":"waves","resolution":"720p"}` {
		t.Fatalf("video submission %s", got)
	}
	if !strings.HasPrefix(done.UpstreamTaskID, "fal-ai/bytedance/requests/") {
		t.Fatalf("upstream task id %s", done.UpstreamTaskID)
	}
	if dl := f.Requests(http.MethodGet, "/files/"); len(dl) != 2 || dl[0].Header.Get("Authorization") != "" {
		t.Fatalf("downloads %v", dl)
	}
	if done.CostUSD != 0.18 {
		t.Fatalf("cost %v", done.CostUSD)
	}
}

func TestFalVideoCancelCancelsTheQueueRequest(t *testing.T) {
	f := falfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1000, 0)
	e := newTaskEnv(t, falUpstreams(f, falfake.Key)...)
	running := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoRunning)
	if _, err := e.svc.App.Videos().CancelVideo(context.Background(), e.tenant, running.ID); err != nil {
		t.Fatal(err)
	}
	id := running.UpstreamTaskID[strings.LastIndex(running.UpstreamTaskID, "/")+1:]
	if got, _ := f.Peek(id); got.State != faketask.Cancelled {
		t.Fatalf("queue request %s", got.State)
	}
	if c := f.Requests(http.MethodPut, "/"+running.UpstreamTaskID+"/cancel"); len(c) != 1 || c[0].Header.Get("Authorization") != "Key "+falfake.Key {
		t.Fatalf("cancel requests %v", c)
	}
	if e.spendable() != 100 {
		t.Fatalf("spendable %d", e.spendable())
	}
}

func TestFalRefusalsFailWithTheirRefundAndNoRetry(t *testing.T) {
	f := falfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, falUpstreams(f, falfake.Key)...)
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("[refuse] a fox")}).ID)
	e.expectRefunded(j.Error, "content moderation", falNames...)
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[refuse-output] waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "content moderation", falNames...)
	failed := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[fail] waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(failed.Error, "video generation failed", falNames...)
	f.Fail(faketask.Fault{Status: 422, Method: http.MethodPost, Body: falfake.ContentPolicyBody})
	j = e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID)
	e.expectRefunded(j.Error, "content moderation", falNames...)
	if n := len(f.Requests(http.MethodPost, "")); n != 4 {
		t.Fatalf("%d submissions, want 4 (nothing retried)", n)
	}
}

func TestFalTransientErrorsAreRetriedOnTheSameUpstreamAtMostTwice(t *testing.T) {
	f := falfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, falUpstreams(f, falfake.Key)...)
	f.Fail(faketask.Fault{Status: 429, RetryAfter: "1", Method: http.MethodPost, Body: `{"detail":"Too many requests"}`})
	f.Fail(faketask.Fault{Status: 500, Method: http.MethodPost, Body: `{"detail":"Internal server error"}`})
	start := time.Now()
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoDone, models.VideoFailed))
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the retry came after %s, before the Retry-After of 1 s", took)
	}
	if n := len(f.Requests(http.MethodPost, "")); n != 3 {
		t.Fatalf("%d submissions, want 3 (429, 500, then accepted)", n)
	}
	f.Fail(faketask.Fault{Status: 503, Method: http.MethodPost, Times: 3, Body: `{"detail":"Service unavailable"}`})
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID)
	e.expectSpendable(90, j.Error, "credits refunded", falNames...) // the video cost 10
	if n := len(f.Requests(http.MethodPost, "")); n != 6 {
		t.Fatalf("%d submissions, want 3 more", n)
	}
}

func TestFalRevokedKeyLeavesRotationUntilAProbeSucceeds(t *testing.T) {
	f := falfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, falUpstreams(f, falfake.Key)...)
	f.Fail(faketask.Fault{Status: 401, Method: http.MethodPost, Body: `{"detail":"No user found for Key ID and Secret"}`})
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "credits refunded", falNames...)
	d := 5.0
	if _, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, models.VideoRequest{Prompt: ptr("w"), Duration: &d, Resolution: "720p"}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("a submission while the only upstream is out = %v", err)
	}
	if n, err := e.svc.Engine.ProbeRemoved(context.Background()); n != 1 || err != nil {
		t.Fatalf("probe restored %d, %v", n, err)
	}
	if probes := f.Requests(http.MethodGet, "/fal-ai/bytedance/requests/"+fal.ProbeRequestID+"/status"); len(probes) != 1 {
		t.Fatalf("%d probes", len(probes))
	}
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoDone, models.VideoFailed))

	f.Fail(faketask.Fault{Status: 403, Method: http.MethodPost, Body: `{"detail":"User is locked. Reason: Exhausted balance. Top up your balance at fal.ai/dashboard/billing."}`})
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID)
	e.expectSpendable(90, j.Error, "credits refunded", falNames...)
	if _, err := e.svc.Engine.Plan(routing.Request{Media: upstream.MediaImage}); err == nil {
		t.Fatal("the locked account is still in rotation")
	}
}

func TestFalNoCapableUpstreamIsRefusedAtSubmit(t *testing.T) {
	f := falfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, falUpstreams(f, falfake.Key)...)
	if _, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{{Prompt: ptr("x"), Resolution: "2k"}}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("2k on fal = %v", err)
	}
	d := 5.0
	if _, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, models.VideoRequest{Prompt: ptr("x"), Duration: &d, Resolution: "720p", Images: []string{"https://a.example/x.png"}}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("images on a text-to-video upstream = %v", err)
	}
	if e.spendable() != 100 || len(f.Requests("", "")) != 0 {
		t.Fatalf("spendable %d, %d requests", e.spendable(), len(f.Requests("", "")))
	}
}

func TestFalLostSubmissionIsNeverSubmittedAgain(t *testing.T) {
	f := falfake.New()
	t.Cleanup(f.Close)
	cfgs := falUpstreams(f, falfake.Key)
	cfgs[1].SoftTimeout = 500 * time.Millisecond
	e := newTaskEnv(t, cfgs...)
	f.Fail(faketask.Fault{Delay: 3 * time.Second, Method: http.MethodPost})
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "interrupted while it was being submitted", falNames...)
	if n := len(f.Requests(http.MethodPost, "")); n != 1 {
		t.Fatalf("%d submissions, want 1", n)
	}
	if err := e.svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	task := e.video(models.VideoRequest{Prompt: ptr("waves again")})
	if _, err := e.svc.App.Jobs().BeginUpstreamSubmit(context.Background(), task.ID, "video", "seedance-f"); err != nil {
		t.Fatal(err)
	}
	e.start()
	v = e.waitVideo(task.ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "interrupted while it was being submitted", falNames...)
	if n := len(f.Requests(http.MethodPost, "")); n != 1 {
		t.Fatalf("%d submissions, want still 1", n)
	}
}

// TestReadmeUpstreamsFalExampleRunsAnImageAndAVideo loads the README's fal example (its key from the
// environment) and runs an image and an image-to-video through studio against the fal fake.
func TestReadmeUpstreamsFalExampleRunsAnImageAndAVideo(t *testing.T) {
	f := falfake.New()
	t.Cleanup(f.Close)
	t.Setenv("FAL_KEY", falfake.Key)
	e := newTaskEnv(t, readmeExample(t, "fal", f.URL)...)
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a tea cup"), Model: "flux"}).ID))
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("a kite"), Model: upstream.TierA20Fast, Images: []string{"https://cdn.example/kite.png"}}).ID, models.VideoDone, models.VideoFailed))
	for _, r := range f.Requests(http.MethodPost, "") {
		if r.Header.Get("Authorization") != "Key "+falfake.Key {
			t.Fatalf("%s sent %q", r.Path, r.Header.Get("Authorization"))
		}
	}
	if n := len(f.Requests(http.MethodPost, "/fal-ai/flux/dev")); n != 1 {
		t.Fatalf("%d image submissions", n)
	}
	if n := len(f.Requests(http.MethodPost, "/fal-ai/bytedance/seedance/v1/lite/image-to-video")); n != 1 {
		t.Fatalf("%d video submissions", n)
	}
}
