package jobs_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/gemini"
	geminifake "studio/jobs/upstream/gemini/fake"
	"studio/models"
)

// geminiUpstreams are a Gemini image channel and a Veo video channel on the fake.
func geminiUpstreams(f *geminifake.Server, key string) []upstream.Config {
	return []upstream.Config{
		{Name: "banana-a", Provider: "google", Media: upstream.MediaImage, Family: "nano-banana", Protocol: gemini.Protocol,
			BaseURL: f.URL, APIKey: key, Model: "gemini-2.5-flash-image", Capabilities: []upstream.Capability{upstream.CapReferenceImages},
			SoftTimeout: 2 * time.Second, CostUSD: 0.039},
		{Name: "veo-a", Provider: "google", Media: upstream.MediaVideo, Protocol: gemini.Protocol, BaseURL: f.URL, APIKey: key,
			Model: "veo-3.1-fast-generate-preview", Tiers: []string{upstream.TierA20Fast, upstream.TierA25Pro},
			Capabilities: []upstream.Capability{upstream.CapGenerateAudio}, SoftTimeout: 2 * time.Second, CostUSD: 0.15},
	}
}

var geminiNames = []string{"gemini", "google", "veo", "banana"}

// veo is a video request Veo 3 can serve (8 s).
func veo(prompt string) models.VideoRequest {
	return models.VideoRequest{Prompt: ptr(prompt), Duration: ptr(8.0)}
}

func TestGeminiImageEndToEnd(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, geminiUpstreams(f, geminifake.Key)...)
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a lighthouse"), Ratio: "16:9"}).ID)
	e.expectImageDone(j)
	if j.CostUSD != 0.039 {
		t.Fatalf("cost %v", j.CostUSD)
	}
	reqs := f.Requests(http.MethodPost, "/v1beta/models/gemini-2.5-flash-image:generateContent")
	if len(reqs) != 1 || reqs[0].Header.Get("X-Goog-Api-Key") != geminifake.Key {
		t.Fatalf("%d image requests", len(reqs))
	}
	if got := normJSON(t, reqs[0].Body); got != `{"contents":[{"parts":[{"text":"a lighthouse"}],"role":"user"}],"generationConfig":{"imageConfig":{"aspectRatio":"16:9"},"responseModalities":["IMAGE"]}}` {
		t.Fatalf("request %s", got)
	}
}

func TestGeminiVideoEndToEndResumesPollingAfterARestart(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 1000)
	e := newTaskEnv(t, geminiUpstreams(f, geminifake.Key)...)
	req := veo("waves")
	req.Ratio, req.GenerateAudio = "16:9", true
	v := e.video(req)
	e.waitFor("a few polls", func() bool { return len(f.Requests(http.MethodGet, "/operations/op")) >= 3 })
	e.waitFor("progress while running", func() bool { return e.waitVideo(v.ID, models.VideoRunning).Progress > 0 })
	e.restart()
	polled := len(f.Requests(http.MethodGet, "/operations/op"))
	f.SetPolls(1, 0)
	done := e.waitVideo(v.ID, models.VideoDone, models.VideoFailed)
	e.expectVideoDone(done)
	posts := f.Requests(http.MethodPost, ":predictLongRunning")
	if len(posts) != 1 {
		t.Fatalf("%d submissions, want 1", len(posts))
	}
	if after := len(f.Requests(http.MethodGet, "/v1beta/"+done.UpstreamTaskID)); after <= polled {
		t.Fatalf("the operation was not polled after the restart (%d then %d)", polled, after)
	}
	if got := normJSON(t, posts[0].Body); got != `{"instances":[{"prompt":"waves"}],"parameters":{"aspectRatio":"16:9","durationSeconds":8,"resolution":"720p"}}` {
		t.Fatalf("submission %s", got)
	}
	if dl := f.Requests(http.MethodGet, ":download"); len(dl) != 1 || dl[0].Header.Get("X-Goog-Api-Key") != geminifake.Key {
		t.Fatalf("downloads %v", dl)
	}
	if done.CostUSD != 1.2 {
		t.Fatalf("cost %v, want 8 s at 0.15", done.CostUSD)
	}
}

func TestGeminiVideoCancelStopsFollowingTheOperation(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1000, 0)
	e := newTaskEnv(t, geminiUpstreams(f, geminifake.Key)...)
	v := e.waitVideo(e.video(veo("waves")).ID, models.VideoRunning)
	if _, err := e.svc.App.Videos().CancelVideo(context.Background(), e.tenant, v.ID); err != nil {
		t.Fatal(err)
	}
	if e.spendable() != 100 {
		t.Fatalf("spendable %d", e.spendable())
	}
	// The Gemini API has no cancel: nothing but polls was ever sent, and polling stops.
	time.Sleep(200 * time.Millisecond)
	polls := len(f.Requests(http.MethodGet, "/operations/"))
	time.Sleep(400 * time.Millisecond)
	if n := len(f.Requests(http.MethodGet, "/operations/")); n != polls {
		t.Fatalf("the cancelled operation is still polled (%d then %d)", polls, n)
	}
	if n := len(f.Requests(http.MethodPost, "")); n != 1 {
		t.Fatalf("%d POST requests, want the submission only", n)
	}
}

func TestGeminiRefusalsFailWithTheirRefundAndNoRetry(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, geminiUpstreams(f, geminifake.Key)...)
	v := e.waitVideo(e.video(veo("[refuse] waves")).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "content moderation", geminiNames...)
	out := e.waitVideo(e.video(veo("[refuse-output] waves")).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(out.Error, "content moderation", geminiNames...)
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("[refuse] a fox")}).ID)
	e.expectRefunded(j.Error, "content moderation", geminiNames...)
	j = e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("[refuse-output] a fox")}).ID)
	e.expectRefunded(j.Error, "content moderation", geminiNames...)
	if n := len(f.Requests(http.MethodPost, ":predictLongRunning")); n != 2 {
		t.Fatalf("%d video submissions, want 2", n)
	}
	if n := len(f.Requests(http.MethodPost, ":generateContent")); n != 2 {
		t.Fatalf("%d image submissions, want 2 (a refusal is not retried)", n)
	}
	// A model that answers without a picture fails the job, refunded, without the moderation message.
	j = e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("[fail] a fox")}).ID)
	e.expectRefunded(j.Error, "credits refunded", geminiNames...)
	if strings.Contains(*j.Error, "moderation") {
		t.Fatalf("a failure reads as a refusal: %s", *j.Error)
	}
}

func TestGeminiTransientErrorsAreRetriedOnTheSameUpstreamAtMostTwice(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, geminiUpstreams(f, geminifake.Key)...)
	f.Fail(faketask.Fault{Status: 429, Method: http.MethodPost, Body: geminifake.RateLimitBody})
	f.Fail(faketask.Fault{Status: 500, Method: http.MethodPost, Body: `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`})
	start := time.Now()
	e.expectVideoDone(e.waitVideo(e.video(veo("waves")).ID, models.VideoDone, models.VideoFailed))
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the retry came after %s, before the RetryInfo delay of 1 s", took)
	}
	if n := len(f.Requests(http.MethodPost, ":predictLongRunning")); n != 3 {
		t.Fatalf("%d submissions, want 3 (429, 500, then accepted)", n)
	}
	f.Fail(faketask.Fault{Status: 503, Method: http.MethodPost, Times: 3, Body: geminifake.ServerErrorBody})
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID)
	e.expectSpendable(100-16, j.Error, "credits refunded", geminiNames...) // the 8 s video cost 16
	if n := len(f.Requests(http.MethodPost, ":generateContent")); n != 3 {
		t.Fatalf("%d image requests, want one try and two retries", n)
	}
}

func TestGeminiRevokedKeyLeavesRotationUntilAProbeSucceeds(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, geminiUpstreams(f, geminifake.Key)...)
	f.Fail(faketask.Fault{Status: 400, Method: http.MethodPost, Body: `{"error":{"code":400,"message":"API key expired. Please renew the API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_EXPIRED","domain":"googleapis.com"}]}}`})
	v := e.waitVideo(e.video(veo("waves")).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "credits refunded", geminiNames...)
	if _, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, veo("w")); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("a submission while the only upstream is out of rotation = %v", err)
	}
	restored, err := e.svc.Engine.ProbeRemoved(context.Background())
	if err != nil || restored != 1 {
		t.Fatalf("probe restored %d, %v", restored, err)
	}
	if probes := f.Requests(http.MethodGet, "/v1beta/models/veo-3.1-fast-generate-preview"); len(probes) != 1 || strings.Contains(probes[0].Path, "operations") {
		t.Fatalf("probes %v", probes)
	}
	e.expectVideoDone(e.waitVideo(e.video(veo("waves")).ID, models.VideoDone, models.VideoFailed))

	// Billing not enabled removes the image upstream the same way.
	f.Fail(faketask.Fault{Status: 400, Path: ":generateContent", Body: `{"error":{"code":400,"message":"Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio.","status":"FAILED_PRECONDITION"}}`})
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a fox")}).ID)
	e.expectSpendable(84, j.Error, "credits refunded", geminiNames...) // the 8 s video cost 16
	if _, err := e.svc.Engine.Plan(routing.Request{Media: upstream.MediaImage}); err == nil {
		t.Fatal("the unpaid upstream is still in rotation")
	}
}

func TestGeminiNoCapableUpstreamIsRefusedAtSubmit(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, geminiUpstreams(f, geminifake.Key)...)
	for _, r := range []models.GenerateRequest{{Prompt: ptr("x"), Background: "transparent"}, {Prompt: ptr("x"), Resolution: "4k"}} {
		if _, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{r}); models.KindOf(err) != models.KindNoUpstream {
			t.Fatalf("%+v on Gemini = %v, want %s", r, err, models.NoUpstreamMessage)
		}
	}
	req := veo("x")
	req.Images = []string{"https://a.example/first.png"}
	if _, err := e.svc.App.Videos().SubmitVideo(context.Background(), e.tenant, req); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("image-to-video on Veo = %v", err)
	}
	if e.spendable() != 100 || len(f.Requests("", "")) != 0 {
		t.Fatalf("spendable %d, %d requests", e.spendable(), len(f.Requests("", "")))
	}
}

func TestGeminiLostSubmissionIsNeverSubmittedAgain(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	cfgs := geminiUpstreams(f, geminifake.Key)
	cfgs[1].SoftTimeout = 500 * time.Millisecond
	e := newTaskEnv(t, cfgs...)
	f.Fail(faketask.Fault{Delay: 3 * time.Second, Method: http.MethodPost})
	v := e.waitVideo(e.video(veo("waves")).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "interrupted while it was being submitted", geminiNames...)
	if n := len(f.Requests(http.MethodPost, ":predictLongRunning")); n != 1 {
		t.Fatalf("%d submissions, want 1", n)
	}
	if err := e.svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	task := e.video(veo("waves again"))
	if _, err := e.svc.App.Jobs().BeginUpstreamSubmit(context.Background(), task.ID, "video", "veo-a"); err != nil {
		t.Fatal(err)
	}
	e.start()
	v = e.waitVideo(task.ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(v.Error, "interrupted while it was being submitted", geminiNames...)
	if n := len(f.Requests(http.MethodPost, ":predictLongRunning")); n != 1 {
		t.Fatalf("%d submissions, want still 1", n)
	}
}

// normJSON re-encodes a JSON body so that two compare by content (keys sorted).
func normJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestReadmeUpstreamsGeminiExampleRunsAnImageAndAVideo loads the README's Gemini example (its key from the
// environment) and runs an image and a video through studio against the Gemini fake.
func TestReadmeUpstreamsGeminiExampleRunsAnImageAndAVideo(t *testing.T) {
	f := geminifake.New()
	t.Cleanup(f.Close)
	t.Setenv("GEMINI_API_KEY", geminifake.Key)
	e := newTaskEnv(t, readmeExample(t, "gemini", f.URL)...)
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a lighthouse"), Model: "nano-banana"}).ID))
	req := veo("waves")
	req.Model = upstream.TierA20Fast
	e.expectVideoDone(e.waitVideo(e.video(req).ID, models.VideoDone, models.VideoFailed))
	for _, r := range f.Requests("", "") {
		if r.Header.Get("X-Goog-Api-Key") != geminifake.Key {
			t.Fatalf("%s sent %q", r.Path, r.Header.Get("X-Goog-Api-Key"))
		}
	}
	if n := len(f.Requests(http.MethodPost, "/models/gemini-2.5-flash-image:generateContent")); n != 1 {
		t.Fatalf("%d image requests", n)
	}
	if n := len(f.Requests(http.MethodPost, "/models/veo-3.1-fast-generate-preview:predictLongRunning")); n != 1 {
		t.Fatalf("%d video requests", n)
	}
}
