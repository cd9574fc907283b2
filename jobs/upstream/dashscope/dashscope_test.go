package dashscope_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/dashscope"
	"studio/jobs/upstream/dashscope/fake"
	"studio/jobs/upstream/faketask"
)

func newUpstream(t *testing.T, f *fake.Server, media upstream.Media, key string, caps ...upstream.Capability) *upstream.Upstream {
	t.Helper()
	return newModel(t, f, media, key, "", caps...)
}

// newModel is newUpstream with another model ("" keeps the default of the media).
func newModel(t *testing.T, f *fake.Server, media upstream.Media, key, model string, caps ...upstream.Capability) *upstream.Upstream {
	t.Helper()
	cfg := upstream.Config{Name: "wan-" + string(media), Provider: "aliyun", Media: media, Family: "wan", Protocol: dashscope.Protocol,
		BaseURL: f.URL, APIKey: key, Model: "wan2.2-t2i-flash", Capabilities: caps, SoftTimeout: 5 * time.Second}
	if media == upstream.MediaVideo {
		cfg.Family, cfg.Model, cfg.Tiers = "", "wan2.5-t2v-preview", []string{upstream.TierA20Fast}
	}
	if model != "" {
		cfg.Model = model
	}
	set, err := upstream.NewSet([]upstream.Config{cfg})
	if err != nil {
		t.Fatal(err)
	}
	return set.All[0]
}

func canonical(b []byte) string {
	var v any
	_ = json.Unmarshal(b, &v)
	out, _ := json.Marshal(v)
	return string(out)
}

func TestRequestsAreExactlyDashScopes(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	img := newUpstream(t, f, upstream.MediaImage, fake.Key)
	if _, err := img.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaImage, Image: upstream.ImageRequest{Prompt: "a cat", Ratio: "16:9"}}); err != nil {
		t.Fatal(err)
	}
	r := f.Requests(http.MethodPost, "/api/v1/services/aigc/text2image/image-synthesis")
	if len(r) != 1 || canonical(r[0].Body) != `{"input":{"prompt":"a cat"},"model":"wan2.2-t2i-flash","parameters":{"n":1,"size":"1024*576","watermark":false}}` ||
		r[0].Header.Get("X-DashScope-Async") != "enable" || r[0].Header.Get("Authorization") != "Bearer "+fake.Key {
		t.Fatalf("image request %v %s", r[0].Header, r[0].Body)
	}
	vid := newUpstream(t, f, upstream.MediaVideo, fake.Key, upstream.CapImages, upstream.CapGenerateAudio)
	if _, err := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "waves", Ratio: "9:16", Resolution: "720p", Duration: 5, GenerateAudio: true}}); err != nil {
		t.Fatal(err)
	}
	i2v := newModel(t, f, upstream.MediaVideo, fake.Key, "wan2.5-i2v-preview", upstream.CapImages)
	if _, err := i2v.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "waves", Resolution: "480p", Duration: 10, Images: []string{"https://a/0.png"}}}); err != nil {
		t.Fatal(err)
	}
	// A first and last frame go to a kf2v model on its own endpoint (the SDK's task image2video).
	kf := newModel(t, f, upstream.MediaVideo, fake.Key, "wan2.2-kf2v-flash", upstream.CapImages)
	if _, err := kf.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "waves", Resolution: "1080p", Duration: 5, Images: []string{"https://a/1.png", "https://a/2.png"}}}); err != nil {
		t.Fatal(err)
	}
	r = f.Requests(http.MethodPost, "/api/v1/services/aigc/video-generation/video-synthesis")
	r = append(r, f.Requests(http.MethodPost, "/api/v1/services/aigc/image2video/video-synthesis")...)
	want := []string{
		`{"input":{"prompt":"waves"},"model":"wan2.5-t2v-preview","parameters":{"audio":true,"duration":5,"size":"720*1280","watermark":false}}`,
		`{"input":{"img_url":"https://a/0.png","prompt":"waves"},"model":"wan2.5-i2v-preview","parameters":{"duration":10,"resolution":"480P","watermark":false}}`,
		`{"input":{"first_frame_url":"https://a/1.png","last_frame_url":"https://a/2.png","prompt":"waves"},"model":"wan2.2-kf2v-flash","parameters":{"duration":5,"resolution":"1080P","watermark":false}}`,
	}
	if len(r) != len(want) {
		t.Fatalf("%d video requests, want %d", len(r), len(want))
	}
	for i, w := range want {
		if got := canonical(r[i].Body); got != w {
			t.Errorf("video %d\n got %s\nwant %s", i, got, w)
		}
		if r[i].Header.Get("X-DashScope-Async") != "enable" {
			t.Errorf("video %d without X-DashScope-Async", i)
		}
	}
	// Two frames for a model that is not kf2v, or a kf2v model asked for 10 s, are not served (routing
	// moves on); the fake refuses a first/last frame sent to video-generation.
	for _, c := range []struct {
		u   *upstream.Upstream
		req upstream.VideoRequest
	}{
		{vid, upstream.VideoRequest{Prompt: "w", Resolution: "720p", Duration: 5, Images: []string{"https://a/1.png", "https://a/2.png"}}},
		{kf, upstream.VideoRequest{Prompt: "w", Resolution: "720p", Duration: 10, Images: []string{"https://a/1.png", "https://a/2.png"}}},
	} {
		_, err := c.u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: c.req})
		var ue *upstream.Error
		if !errors.As(err, &ue) || ue.Class != upstream.ClassCapability {
			t.Errorf("%s: %v, want a capability error", c.u.Config.Model, err)
		}
	}
}

func TestPollCancelAndErrors(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	vid := newUpstream(t, f, upstream.MediaVideo, fake.Key)
	task, err := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "w", Resolution: "720p", Duration: 5}})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	var last *upstream.Task
	for i := 0; i < 6 && (last == nil || !last.Status.Ended()); i++ {
		if last, err = vid.Tasks().Poll(ctx, upstream.MediaVideo, task.ID); err != nil {
			t.Fatal(err)
		}
		states = append(states, string(last.Status))
	}
	if strings.Join(states, ",") != "queued,running,running,succeeded" || len(last.Outputs) != 1 {
		t.Fatalf("states %v", states)
	}
	queued, _ := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "w", Resolution: "720p", Duration: 5}})
	if err := vid.Tasks().Cancel(ctx, upstream.MediaVideo, queued.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.Requests(http.MethodPost, "/api/v1/tasks/"+queued.ID+"/cancel"); len(got) != 1 {
		t.Fatalf("%d cancels", len(got))
	}
	req := upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "w", Resolution: "720p", Duration: 5}}
	for _, c := range []struct {
		name  string
		key   string
		fault *faketask.Fault
		req   upstream.TaskRequest
		class upstream.Class
	}{
		{"revoked", "sk-other", nil, req, upstream.ClassRevoked},
		{"overdue", fake.OverdueKey, nil, req, upstream.ClassUnpaid},
		{"throttled", fake.Key, &faketask.Fault{Status: 429, Body: `{"code":"Throttling.RateQuota","message":"rate"}`}, req, upstream.ClassTransient},
		{"server", fake.Key, &faketask.Fault{Status: 500, Body: `{"code":"InternalError","message":"x"}`}, req, upstream.ClassTransient},
		{"refused", fake.Key, nil, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "[refuse]", Resolution: "720p", Duration: 5}}, upstream.ClassRefused},
	} {
		if c.fault != nil {
			f.Fail(*c.fault)
		}
		_, err := newUpstream(t, f, upstream.MediaVideo, c.key).Tasks().Submit(ctx, c.req)
		var ue *upstream.Error
		if !errors.As(err, &ue) || ue.Class != c.class {
			t.Errorf("%s: %v, want %s", c.name, err, c.class)
		}
	}
	if err := vid.Probe(ctx); err != nil {
		t.Fatal(err)
	}
}
