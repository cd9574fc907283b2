package jobs_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/kling"
	klingfake "studio/jobs/upstream/kling/fake"
	"studio/models"
)

func klingUpstreams(f *klingfake.Server, ak string) []upstream.Config {
	return []upstream.Config{
		{Name: "kolors-a", Provider: "kuaishou", Media: upstream.MediaImage, Family: "kolors", Protocol: kling.Protocol, BaseURL: f.URL,
			APIKey: ak, SecretKey: klingfake.SecretKey, Model: "kling-v2-1", Capabilities: []upstream.Capability{upstream.CapReferenceImages},
			SoftTimeout: 2 * time.Second, CostUSD: 0.01},
		{Name: "kling-v", Provider: "kuaishou", Media: upstream.MediaVideo, Protocol: kling.Protocol, BaseURL: f.URL, APIKey: ak,
			SecretKey: klingfake.SecretKey, Model: "kling-v2-1-master", Tiers: []string{upstream.TierA20Fast, upstream.TierA20Mini},
			Capabilities: []upstream.Capability{upstream.CapImages}, SoftTimeout: 2 * time.Second, CostUSD: 0.05},
	}
}

var klingNames = []string{"kling", "kolors", "kuaishou"}

func TestKlingImageEndToEndIsPolled(t *testing.T) {
	f := klingfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 3)
	e := newTaskEnv(t, klingUpstreams(f, klingfake.AccessKey)...)
	j := e.image(models.GenerateRequest{Prompt: ptr("a tea cup"), Ratio: "4:3"})
	e.waitFor("a progress note", func() bool {
		got, _ := e.svc.App.Jobs().Job(context.Background(), j.ID)
		return got.Status == models.JobPending && got.Progress != ""
	})
	done := e.waitJob(j.ID)
	e.expectImageDone(done)
	if n := len(f.Requests(http.MethodPost, "/v1/images/generations")); n != 1 {
		t.Fatalf("%d submissions", n)
	}
	if n := len(f.Requests(http.MethodGet, "/v1/images/generations/")); n != 5 {
		t.Fatalf("%d polls, want 5 (1 queued, 3 running, 1 succeeded)", n)
	}
}

func TestKlingVideoResumesAfterARestartAndIsFoundByReference(t *testing.T) {
	f := klingfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 1000)
	e := newTaskEnv(t, klingUpstreams(f, klingfake.AccessKey)...)
	v := e.video(models.VideoRequest{Prompt: ptr("a kite"), Ratio: "16:9"})
	e.waitFor("polls", func() bool { return len(f.Requests(http.MethodGet, "/v1/videos/text2video/")) >= 2 })
	e.restart()
	f.SetPolls(1, 0)
	e.expectVideoDone(e.waitVideo(v.ID, models.VideoDone, models.VideoFailed))
	if n := len(f.Requests(http.MethodPost, "/v1/videos/")); n != 1 {
		t.Fatalf("%d submissions", n)
	}

	// The answer of a submission is lost (the task exists at Kling): it is found by its reference.
	f.HoldAnswers(2500 * time.Millisecond)
	v2 := e.video(models.VideoRequest{Prompt: ptr("a kite again"), Images: []string{"https://cdn.example/first.png"}})
	done := e.waitVideo(v2.ID, models.VideoDone, models.VideoFailed)
	f.HoldAnswers(0)
	e.expectVideoDone(done)
	if n := len(f.Requests(http.MethodPost, "/v1/videos/")); n != 2 {
		t.Fatalf("%d submissions, want 2 (one per video)", n)
	}
	post := f.Requests(http.MethodPost, "/v1/videos/image2video")[0].JSON()
	if got := f.Requests(http.MethodGet, "/v1/videos/image2video/"+post["external_task_id"].(string)); len(got) != 1 {
		t.Fatalf("%d look-ups by reference", len(got))
	}
}

func TestKlingCancelRefusalAndErrorClasses(t *testing.T) {
	f := klingfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1000, 0)
	e := newTaskEnv(t, klingUpstreams(f, klingfake.AccessKey)...)
	v := e.video(models.VideoRequest{Prompt: ptr("slow")})
	e.waitVideo(v.ID, models.VideoRunning)
	if c, err := e.svc.App.Videos().CancelVideo(context.Background(), e.tenant, v.ID); err != nil || c.Status != models.VideoCancelled {
		t.Fatalf("cancel %v %v", c, err)
	}
	e.expectSpendable(100, ptr("cancelled"), "cancelled")
	f.SetPolls(1, 1)

	r := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[refuse] x")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(r.Error, "content moderation", klingNames...)
	r = e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[refuse-output] x")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(r.Error, "content moderation", klingNames...)

	f.Fail(faketask.Fault{Status: 429, Method: http.MethodPost, Body: `{"code":1303,"message":"parallel task over resource pack limit"}`})
	f.Fail(faketask.Fault{Status: 503, Method: http.MethodPost, Body: `{"code":5001,"message":"unavailable"}`})
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a cup")}).ID)
	e.expectImageDone(j)

	f.Fail(faketask.Fault{Status: 429, Method: http.MethodPost, Body: `{"code":1102,"message":"resource pack exhausted"}`})
	j = e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a cup")}).ID)
	e.expectSpendable(99, j.Error, "credits refunded", klingNames...)
	if _, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{{Prompt: ptr("x")}}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("submit while the unpaid upstream is out = %v", err)
	}
	if n, err := e.svc.Engine.ProbeRemoved(context.Background()); n != 1 || err != nil {
		t.Fatalf("probe restored %d %v", n, err)
	}
	_, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{{Prompt: ptr("x"), Background: "transparent"}})
	if models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("transparent = %v", err)
	}
}

// A replica died between sending an image submission and recording its answer (the job's upstream task
// stays "submitting"): Kling cannot look image tasks up by reference, so the replica that takes the job
// up fails it with its refund instead of queuing it again and again, and submits nothing.
func TestKlingImageInterruptedInItsSubmissionFailsRefunded(t *testing.T) {
	f := klingfake.New()
	t.Cleanup(f.Close)
	e := newTaskEnv(t, klingUpstreams(f, klingfake.AccessKey)...)
	before := e.spendable()
	if err := e.svc.Stop(context.Background()); err != nil { // the job is queued, nobody runs it yet
		t.Fatal(err)
	}
	j := e.image(models.GenerateRequest{Prompt: ptr("a lost cup")})
	if _, err := e.svc.App.Jobs().BeginUpstreamSubmit(context.Background(), j.ID, string(upstream.MediaImage), "kolors-a"); err != nil {
		t.Fatal(err)
	}
	e.start()
	failed := e.waitJob(j.ID)
	if failed.Status != models.JobFailed || failed.Error == nil || !strings.Contains(*failed.Error, "interrupted while it was being submitted") {
		t.Fatalf("job %s (%v): want failed as a lost submission", failed.Status, failed.Error)
	}
	if got := e.spendable(); got != before {
		t.Fatalf("spendable %d after the failure, want %d (refunded)", got, before)
	}
	if n := len(f.Requests(http.MethodPost, "/v1/images/generations")); n != 0 {
		t.Fatalf("%d submissions, want none", n)
	}
}
