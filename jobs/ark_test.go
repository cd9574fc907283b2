package jobs_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/jobs/upstream/ark"
	arkfake "studio/jobs/upstream/ark/fake"
	"studio/jobs/upstream/faketask"
	"studio/models"
)

// arkUpstreams are an Ark image channel and an Ark video channel on the fake.
func arkUpstreams(f *arkfake.Server, key string) []upstream.Config {
	return []upstream.Config{
		{Name: "seedream-a", Provider: "volcengine", Media: upstream.MediaImage, Family: "seedream", Protocol: ark.Protocol,
			BaseURL: f.URL, APIKey: key, Model: "doubao-seedream-4-0-250828", Capabilities: []upstream.Capability{upstream.CapReferenceImages, upstream.CapLarge},
			SoftTimeout: 2 * time.Second, CostUSD: 0.03},
		{Name: "seedance-a", Provider: "volcengine", Media: upstream.MediaVideo, Protocol: ark.Protocol, BaseURL: f.URL, APIKey: key,
			Model: "doubao-seedance-1-5-pro-251215", Tiers: []string{upstream.TierA20Fast, upstream.TierA20Mini},
			Capabilities: []upstream.Capability{upstream.CapImages, upstream.CapGenerateAudio}, SoftTimeout: 2 * time.Second, CostUSD: 0.1},
	}
}

var arkNames = []string{"seedream", "seedance", "volcengine", "ark"}

func TestArkImageEndToEnd(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a lighthouse"), Ratio: "16:9", Resolution: "2k"}).ID)
	e.expectImageDone(j)
	if j.CostUSD != 0.03 {
		t.Fatalf("cost %v", j.CostUSD)
	}
	reqs := f.Requests(http.MethodPost, "/api/v3/images/generations")
	if len(reqs) != 1 {
		t.Fatalf("%d image requests", len(reqs))
	}
	if b := reqs[0].JSON(); b["prompt"] != "a lighthouse" || b["size"] != "2720x1536" || b["watermark"] != false || b["model"] != "doubao-seedream-4-0-250828" {
		t.Fatalf("request %s", reqs[0].Body)
	}
}

func TestArkVideoEndToEndResumesPollingAfterARestart(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 1000)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	v := e.video(models.VideoRequest{Prompt: ptr("waves"), Ratio: "16:9", Images: []string{"https://cdn.example/first.png"}, GenerateAudio: true})
	e.waitFor("a few polls", func() bool { return len(f.Requests(http.MethodGet, "/contents/generations/tasks/cgt-")) >= 3 })
	// Progress shows while the task runs (Ark reports none: the elapsed time against the tier's expected
	// time); it may read 0 at the very start on a loaded machine, so wait for it.
	e.waitFor("progress while running", func() bool {
		running := e.waitVideo(v.ID, models.VideoRunning)
		return running.Progress > 0
	})
	e.restart() // the replica stops while the task runs; another takes over
	polled := len(f.Requests(http.MethodGet, "/contents/generations/tasks/cgt-"))
	f.SetPolls(1, 0)
	done := e.waitVideo(v.ID, models.VideoDone, models.VideoFailed)
	e.expectVideoDone(done)
	if n := len(f.Requests(http.MethodPost, "/contents/generations/tasks")); n != 1 {
		t.Fatalf("%d submissions, want 1", n)
	}
	if after := len(f.Requests(http.MethodGet, "/contents/generations/tasks/"+done.UpstreamTaskID)); after <= polled {
		t.Fatalf("the task was not polled after the restart (%d then %d)", polled, after)
	}
	body := f.Requests(http.MethodPost, "/contents/generations/tasks")[0].JSON()
	if body["generate_audio"] != true || body["duration"] != 5.0 || body["resolution"] != "720p" || body["model"] != "doubao-seedance-1-5-pro-251215" {
		t.Fatalf("submission %v", body)
	}
	if done.CostUSD != 0.5 {
		t.Fatalf("cost %v, want 5 s at 0.1", done.CostUSD)
	}
}

func TestArkVideoCancelCancelsTheUpstreamTask(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1000, 0)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	v := e.video(models.VideoRequest{Prompt: ptr("waves")})
	running := e.waitVideo(v.ID, models.VideoRunning)
	if _, err := e.svc.App.Videos().CancelVideo(context.Background(), e.tenant, v.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Peek(running.UpstreamTaskID); got.State != faketask.Cancelled {
		t.Fatalf("upstream task %s", got.State)
	}
	if del := f.Requests(http.MethodDelete, "/contents/generations/tasks/"+running.UpstreamTaskID); len(del) != 1 || del[0].Header.Get("Authorization") != "Bearer "+arkfake.Key {
		t.Fatalf("DELETE requests %v", del)
	}
	if e.spendable() != 100 {
		t.Fatalf("spendable %d", e.spendable())
	}
}

func TestArkRefusalsFailWithTheirRefundAndNoRetry(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[refuse] waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "content moderation", arkNames...)
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("[refuse] a fox")}).ID)
	e.expectRefunded(j.Error, "content moderation", arkNames...)
	out := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[refuse-output] waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(out.Error, "content moderation", arkNames...)
	if n := len(f.Requests(http.MethodPost, "/contents/generations/tasks")); n != 2 {
		t.Fatalf("%d video submissions, want 2 (a refusal is not retried)", n)
	}
	if n := len(f.Requests(http.MethodPost, "/images/generations")); n != 1 {
		t.Fatalf("%d image submissions, want 1", n)
	}
}

func TestArkTransientErrorsAreRetriedOnTheSameUpstreamAtMostTwice(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	f.Fail(faketask.Fault{Status: 429, RetryAfter: "1", Method: http.MethodPost, Body: `{"error":{"code":"RateLimitExceeded","message":"rate"}}`})
	f.Fail(faketask.Fault{Status: 500, Method: http.MethodPost, Body: `{"error":{"code":"InternalServiceError","message":"oops"}}`})
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoDone, models.VideoFailed))
	posts := f.Requests(http.MethodPost, "/contents/generations/tasks")
	if len(posts) != 3 {
		t.Fatalf("%d submissions, want 3 (429, 500, then accepted)", len(posts))
	}
	f.Fail(faketask.Fault{Status: 503, Method: http.MethodPost, Times: 3, Body: `{"error":{"code":"ServiceUnavailable","message":"down"}}`})
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoDone, models.VideoFailed)
	e.expectSpendable(90, v.Error, "credits refunded", arkNames...) // the first video cost 10
	if n := len(f.Requests(http.MethodPost, "/contents/generations/tasks")); n != 6 {
		t.Fatalf("%d submissions, want 3 more (one try and two retries)", n)
	}
}

func TestArkRetryAfterIsHonoured(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	f.Fail(faketask.Fault{Status: 429, RetryAfter: "1", Path: "/images/", Body: `{"error":{"code":"RateLimitExceeded","message":"rate"}}`})
	start := time.Now()
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID))
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the retry came after %s, before the Retry-After of 1 s", took)
	}
	if n := len(f.Requests(http.MethodPost, "/images/generations")); n != 2 {
		t.Fatalf("%d image requests, want 2", n)
	}
}

func TestArkRevokedKeyLeavesRotationUntilAProbeSucceeds(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	f.Fail(faketask.Fault{Status: 401, Method: http.MethodPost, Body: `{"error":{"code":"AuthenticationError","message":"bad key"}}`})
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "credits refunded", arkNames...)
	d := 5.0
	if _, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, models.VideoRequest{Prompt: ptr("w"), Duration: &d, Resolution: "720p"}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("a submission while the only upstream is out of rotation = %v, want %s", err, models.NoUpstreamMessage)
	}
	restored, err := e.svc.Engine.ProbeRemoved(context.Background())
	if err != nil || restored != 1 {
		t.Fatalf("probe restored %d, %v", restored, err)
	}
	if probes := f.Requests(http.MethodGet, "/contents/generations/tasks?page_num=1&page_size=1"); len(probes) != 1 {
		t.Fatalf("%d probes", len(probes))
	}
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoDone, models.VideoFailed))

	// An overdue account is removed the same way.
	f.Fail(faketask.Fault{Status: 403, Path: "/images/", Body: `{"error":{"code":"AccountOverdueError","message":"overdue"}}`})
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID)
	e.expectSpendable(90, j.Error, "credits refunded", arkNames...) // the video done meanwhile cost 10
	if _, err := e.svc.Engine.Plan(routing.Request{Media: upstream.MediaImage}); err == nil {
		t.Fatal("the overdue upstream is still in rotation")
	}
}

func TestArkNoCapableUpstreamIsRefusedAtSubmit(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	_, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{{Prompt: ptr("x"), Background: "transparent"}})
	if models.KindOf(err) != models.KindNoUpstream || !strings.Contains(err.Error(), models.NoUpstreamMessage) {
		t.Fatalf("transparent on Ark = %v, want %s", err, models.NoUpstreamMessage)
	}
	d := 5.0
	_, err = e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, models.VideoRequest{Prompt: ptr("x"), Duration: &d, Resolution: "720p", Audios: []string{"https://a.example/a.mp3"}})
	if models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("audios on an upstream that does not declare them = %v", err)
	}
	if e.spendable() != 100 || len(f.Requests("", "")) != 0 {
		t.Fatalf("spendable %d, %d requests", e.spendable(), len(f.Requests("", "")))
	}
}

func TestArkLostSubmissionIsNeverSubmittedAgain(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	cfgs := arkUpstreams(f, arkfake.Key)
	cfgs[1].SoftTimeout = 500 * time.Millisecond
	e := newTaskEnv(t, cfgs...)
	// The answer never comes within the soft time-out: Ark may have started (and will bill) the task.
	f.Fail(faketask.Fault{Delay: 3 * time.Second, Method: http.MethodPost})
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "interrupted while it was being submitted", arkNames...)
	if n := len(f.Requests(http.MethodPost, "/contents/generations/tasks")); n != 1 {
		t.Fatalf("%d submissions, want 1", n)
	}

	// A replica that crashed after recording a submission and before the answer: the next run does not
	// submit again.
	if err := e.svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	task := e.video(models.VideoRequest{Prompt: ptr("waves again")})
	if _, err := e.svc.App.Jobs().BeginUpstreamSubmit(context.Background(), task.ID, "video", "seedance-a"); err != nil {
		t.Fatal(err)
	}
	e.start()
	v = e.waitVideo(task.ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "interrupted while it was being submitted", arkNames...)
	if n := len(f.Requests(http.MethodPost, "/contents/generations/tasks")); n != 1 {
		t.Fatalf("%d submissions, want still 1", n)
	}
}

func TestArkKeyRevokedWhilePollingLeavesRotationAndTheTaskFinishes(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 4)
	e := newTaskEnv(t, arkUpstreams(f, arkfake.Key)...)
	v := e.video(models.VideoRequest{Prompt: ptr("waves")})
	running := e.waitVideo(v.ID, models.VideoRunning)
	f.Fail(faketask.Fault{Status: 401, Method: http.MethodGet, Path: "/contents/generations/tasks/" + running.UpstreamTaskID,
		Body: `{"error":{"code":"AuthenticationError","message":"the API key is revoked"}}`})
	e.waitFor("the upstream out of rotation", func() bool {
		_, err := e.svc.Engine.Plan(routing.Request{Media: upstream.MediaVideo})
		return err != nil
	})
	// The task the upstream accepted is still followed to its end; the probe brings the upstream back.
	e.expectVideoDone(e.waitVideo(v.ID, models.VideoDone, models.VideoFailed))
	if n := len(f.Requests(http.MethodPost, "/contents/generations/tasks")); n != 1 {
		t.Fatalf("%d submissions, want 1", n)
	}
	if restored, err := e.svc.Engine.ProbeRemoved(context.Background()); err != nil || restored != 1 {
		t.Fatalf("probe restored %d, %v", restored, err)
	}
	if _, err := e.svc.Engine.Plan(routing.Request{Media: upstream.MediaVideo}); err != nil {
		t.Fatalf("the upstream is not back in rotation: %v", err)
	}
}
