package jobs_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/dashscope"
	dsfake "studio/jobs/upstream/dashscope/fake"
	"studio/jobs/upstream/faketask"
	"studio/models"
)

func dashscopeUpstreams(f *dsfake.Server) []upstream.Config {
	return []upstream.Config{
		{Name: "wan-image", Provider: "aliyun", Media: upstream.MediaImage, Family: "wan", Protocol: dashscope.Protocol, BaseURL: f.URL,
			APIKey: dsfake.Key, Model: "wan2.2-t2i-flash", SoftTimeout: 2 * time.Second, CostUSD: 0.02},
		{Name: "wan-video", Provider: "aliyun", Media: upstream.MediaVideo, Protocol: dashscope.Protocol, BaseURL: f.URL, APIKey: dsfake.Key,
			Model: "wan2.5-t2v-preview", Tiers: []string{upstream.TierA20Fast}, Capabilities: []upstream.Capability{upstream.CapImages},
			SoftTimeout: 2 * time.Second, CostUSD: 0.05},
	}
}

var dashscopeNames = []string{"wan", "aliyun", "dashscope"}

func TestDashScopeImageAndVideoEndToEnd(t *testing.T) {
	f := dsfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1, 1000)
	e := newTaskEnv(t, dashscopeUpstreams(f)...)
	j := e.image(models.GenerateRequest{Prompt: ptr("a tea cup")})
	v := e.video(models.VideoRequest{Prompt: ptr("waves"), Ratio: "16:9"})
	e.waitFor("polls of both", func() bool { return len(f.Requests(http.MethodGet, "/api/v1/tasks/ds-")) >= 4 })
	e.restart()
	f.SetPolls(1, 0)
	e.expectImageDone(e.waitJob(j.ID))
	e.expectVideoDone(e.waitVideo(v.ID, models.VideoDone, models.VideoFailed))
	if n := len(f.Requests(http.MethodPost, "/services/aigc/")); n != 2 {
		t.Fatalf("%d submissions, want 2", n)
	}
}

func TestDashScopeCancelRefusalAndClasses(t *testing.T) {
	f := dsfake.New()
	t.Cleanup(f.Close)
	f.SetPolls(1000, 0)
	e := newTaskEnv(t, dashscopeUpstreams(f)...)
	v := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("slow")}).ID, models.VideoRunning)
	if _, err := e.svc.App.Videos().CancelVideo(context.Background(), e.tenant, v.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Peek(v.UpstreamTaskID[len("ds-"):]); got.State != faketask.Cancelled {
		t.Fatalf("upstream task %s", got.State)
	}
	f.SetPolls(1, 1)
	r := e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("[refuse] x")}).ID, models.VideoFailed, models.VideoDone)
	e.expectRefunded(r.Error, "content moderation", dashscopeNames...)
	j := e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("[refuse-output] x")}).ID)
	e.expectRefunded(j.Error, "content moderation", dashscopeNames...)

	f.Fail(faketask.Fault{Status: 429, Method: http.MethodPost, Body: `{"code":"Throttling","message":"rate"}`})
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a cup")}).ID))
	f.Fail(faketask.Fault{Status: 400, Method: http.MethodPost, Body: `{"code":"Arrearage","message":"overdue"}`})
	j = e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a cup")}).ID)
	e.expectSpendable(99, j.Error, "credits refunded", dashscopeNames...)
	if _, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{{Prompt: ptr("x")}}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("submit while the unpaid upstream is out = %v", err)
	}
	if n, err := e.svc.Engine.ProbeRemoved(context.Background()); n != 1 || err != nil {
		t.Fatalf("probe restored %d, %v", n, err)
	}
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a cup")}).ID))
	if _, err := e.svc.App.Jobs().SubmitImages(context.Background(), e.tenant, []models.GenerateRequest{{Prompt: ptr("x"), ReferenceImages: []string{"https://a.example/x.png"}}}); models.KindOf(err) != models.KindNoUpstream {
		t.Fatalf("reference images on DashScope = %v", err)
	}
}
