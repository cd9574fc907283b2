package ark_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/ark"
	"studio/jobs/upstream/ark/fake"
	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
)

func newUpstream(t *testing.T, f *fake.Server, media upstream.Media, key string, caps ...upstream.Capability) *upstream.Upstream {
	t.Helper()
	cfg := upstream.Config{Name: "ark-" + string(media), Provider: "volcengine", Media: media, Family: "seedream", Protocol: ark.Protocol,
		BaseURL: f.URL, APIKey: key, Model: "doubao-seedream-4-0-250828", Capabilities: caps, SoftTimeout: 5 * time.Second}
	if media == upstream.MediaVideo {
		cfg.Family, cfg.Model, cfg.Tiers = "", "doubao-seedance-1-5-pro-251215", []string{upstream.TierA20Fast}
	}
	set, err := upstream.NewSet([]upstream.Config{cfg})
	if err != nil {
		t.Fatal(err)
	}
	return set.All[0]
}

// canonical re-encodes JSON so that two bodies compare by content.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestImageRequestIsExactlySeedreams(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaImage, fake.Key, upstream.CapReferenceImages, upstream.CapLarge)
	ref1, ref2 := fakeupstream.PNG("a"), fakeupstream.PNG("b")
	task, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaImage, Ref: "job-1",
		Image: upstream.ImageRequest{Prompt: "a red fox", Ratio: "16:9", Resolution: "2k", ReferenceImages: [][]byte{ref1, ref2}}})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != upstream.TaskSucceeded || len(task.Outputs) != 1 || !bytes.Equal(task.Outputs[0].Data, fakeupstream.PNG("a red fox")) {
		t.Fatalf("task = %+v", task)
	}
	reqs := f.Requests(http.MethodPost, "/api/v3/images/generations")
	if len(reqs) != 1 {
		t.Fatalf("%d image requests, want 1", len(reqs))
	}
	d := func(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }
	want, _ := json.Marshal(map[string]any{"model": "doubao-seedream-4-0-250828", "prompt": "a red fox", "image": []string{d(ref1), d(ref2)},
		"size": "2720x1536", "response_format": "b64_json", "watermark": false})
	if got := canonical(t, reqs[0].Body); got != canonical(t, want) {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	if reqs[0].Header.Get("Authorization") != "Bearer "+fake.Key || reqs[0].Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", reqs[0].Header)
	}
	// One reference goes as a single string; 1k keeps about one megapixel.
	if _, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaImage,
		Image: upstream.ImageRequest{Prompt: "p", Ratio: "3:4", ReferenceImages: [][]byte{ref1}}}); err != nil {
		t.Fatal(err)
	}
	body := f.Requests(http.MethodPost, "/images/generations")[1].JSON()
	if body["image"] != d(ref1) || body["size"] != "880x1168" {
		t.Fatalf("single reference body: image %T size %v", body["image"], body["size"])
	}
}

func TestSizeKeepsTheAreaOfTheResolution(t *testing.T) {
	for _, c := range []struct{ ratio, res, want string }{
		{"", "", "1024x1024"}, {"1:1", "2k", "2048x2048"}, {"16:9", "1k", "1360x768"}, {"9:16", "4k", "3072x5456"},
	} {
		if got := ark.Size(c.ratio, c.res); got != c.want {
			t.Errorf("Size(%q, %q) = %s, want %s", c.ratio, c.res, got, c.want)
		}
	}
}

func TestVideoTaskRequestPollAndDownload(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaVideo, fake.Key, upstream.CapImages, upstream.CapGenerateAudio)
	ctx := context.Background()
	task, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Ref: "v-1", Video: upstream.VideoRequest{
		Prompt: "waves at dusk", Tier: upstream.TierA20Fast, Ratio: "16:9", Resolution: "720p", Duration: 5,
		Images: []string{"https://cdn.example/first.png", "https://cdn.example/last.png"}, GenerateAudio: true}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.Requests(http.MethodPost, "/api/v3/contents/generations/tasks")
	want := `{"content":[{"text":"waves at dusk","type":"text"},{"image_url":{"url":"https://cdn.example/first.png"},"role":"first_frame","type":"image_url"},` +
		`{"image_url":{"url":"https://cdn.example/last.png"},"role":"last_frame","type":"image_url"}],"duration":5,"generate_audio":true,` +
		`"model":"doubao-seedance-1-5-pro-251215","ratio":"16:9","resolution":"720p","watermark":false}`
	if len(reqs) != 1 || canonical(t, reqs[0].Body) != want {
		t.Fatalf("task body\n got %s\nwant %s", reqs[0].Body, want)
	}
	var states []upstream.TaskStatus
	var last *upstream.Task
	for i := 0; i < 6 && (last == nil || !last.Status.Ended()); i++ {
		last, err = u.Tasks().Poll(ctx, upstream.MediaVideo, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, last.Status)
	}
	if strings.Join(func() []string {
		var s []string
		for _, x := range states {
			s = append(s, string(x))
		}
		return s
	}(), ",") != "queued,running,running,succeeded" {
		t.Fatalf("states %v", states)
	}
	if got := f.Requests(http.MethodGet, "/api/v3/contents/generations/tasks/"+task.ID); len(got) != 4 {
		t.Fatalf("%d polls of GET .../tasks/{id}", len(got))
	}
	rc, err := u.Tasks().Open(ctx, last.Outputs[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, fakeupstream.MP4) {
		t.Fatalf("downloaded %d bytes", len(b))
	}
}

func TestVideoReferencesAndSoundRoles(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaVideo, fake.Key, upstream.CapImages, upstream.CapVideos, upstream.CapAudios, upstream.CapGenerateAudio)
	_, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{
		Prompt: "p", Duration: 5, Resolution: "1080p", Images: []string{"https://a/1.png", "https://a/2.png", "https://a/3.png"},
		Videos: []string{"https://a/v.mp4"}, Audios: []string{"https://a/a.mp3"}}})
	if err != nil {
		t.Fatal(err)
	}
	body := f.Requests(http.MethodPost, "/contents/generations/tasks")[0].JSON()
	var roles []string
	for _, it := range body["content"].([]any) {
		m := it.(map[string]any)
		roles = append(roles, m["type"].(string)+"/"+func() string { s, _ := m["role"].(string); return s }())
	}
	if strings.Join(roles, " ") != "text/ image_url/reference_image image_url/reference_image image_url/reference_image video_url/reference_video audio_url/reference_audio" {
		t.Fatalf("roles %v", roles)
	}
	if body["generate_audio"] != false {
		t.Fatalf("generate_audio = %v, want an explicit false when the request does not ask for sound", body["generate_audio"])
	}
}

func TestErrorsAreClassified(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	video := upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "p", Duration: 5}}
	cases := []struct {
		name  string
		key   string
		fault *faketask.Fault
		req   upstream.TaskRequest
		class upstream.Class
		retry time.Duration
	}{
		{"revoked key", fake.RevokedKey, nil, video, upstream.ClassRevoked, 0},
		{"overdue account", fake.OverdueKey, nil, video, upstream.ClassUnpaid, 0},
		{"rate limited", fake.Key, &faketask.Fault{Status: 429, RetryAfter: "3", Body: `{"error":{"code":"RateLimitExceeded","message":"slow down"}}`}, video, upstream.ClassTransient, 3 * time.Second},
		{"quota", fake.Key, &faketask.Fault{Status: 429, Body: `{"error":{"code":"QuotaExceeded","message":"quota"}}`}, video, upstream.ClassUnpaid, 0},
		{"server error", fake.Key, &faketask.Fault{Status: 503, Body: `{"error":{"code":"ServiceUnavailable","message":"down"}}`}, video, upstream.ClassTransient, 0},
		{"refused prompt", fake.Key, nil, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "[refuse] x", Duration: 5}}, upstream.ClassRefused, 0},
		{"refused image prompt", fake.Key, nil, upstream.TaskRequest{Media: upstream.MediaImage, Image: upstream.ImageRequest{Prompt: "[refuse] x"}}, upstream.ClassRefused, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.fault != nil {
				f.Fail(*c.fault)
			}
			u := newUpstream(t, f, c.req.Media, c.key)
			_, err := u.Tasks().Submit(ctx, c.req)
			var ue *upstream.Error
			if !errors.As(err, &ue) || ue.Class != c.class || ue.RetryAfter != c.retry || upstream.UnknownOutcome(err) {
				t.Fatalf("err = %v (%+v), want class %s retry %s", err, ue, c.class, c.retry)
			}
		})
	}
	u := newUpstream(t, f, upstream.MediaVideo, fake.Key)
	if err := u.Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := newUpstream(t, f, upstream.MediaVideo, fake.RevokedKey).Probe(ctx); upstream.ClassOf(err) != upstream.ClassRevoked {
		t.Fatalf("probe with a revoked key = %v", err)
	}
	if n := len(f.Requests(http.MethodPost, "/contents/generations/tasks")); n != 7-1 {
		// every submission reached the fake once (the image refusal went to /images/generations)
		t.Fatalf("%d submissions", n)
	}
}

func TestTaskFailuresAndCancel(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	u := newUpstream(t, f, upstream.MediaVideo, fake.Key)
	poll := func(id string) *upstream.Task {
		var last *upstream.Task
		for i := 0; i < 8; i++ {
			var err error
			if last, err = u.Tasks().Poll(ctx, upstream.MediaVideo, id); err != nil {
				t.Fatal(err)
			}
			if last.Status.Ended() {
				break
			}
		}
		return last
	}
	refused, _ := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "[refuse-output]"}})
	if got := poll(refused.ID); got.Status != upstream.TaskFailed || got.Err == nil || got.Err.Class != upstream.ClassRefused {
		t.Fatalf("refused output: %+v", got)
	}
	failed, _ := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "[fail]"}})
	if got := poll(failed.ID); got.Status != upstream.TaskFailed || got.Err.Class == upstream.ClassRefused {
		t.Fatalf("failed: %+v", got)
	}
	queued, _ := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "p"}})
	if err := u.Tasks().Cancel(ctx, upstream.MediaVideo, queued.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Peek(queued.ID); got.State != faketask.Cancelled {
		t.Fatalf("state after cancel %s", got.State)
	}
	if del := f.Requests(http.MethodDelete, "/api/v3/contents/generations/tasks/"+queued.ID); len(del) != 1 {
		t.Fatalf("%d DELETE requests", len(del))
	}
	if _, err := u.Tasks().Poll(ctx, upstream.MediaVideo, "cgt-unknown"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("poll of an unknown task = %v", err)
	}
}

// TestFakeIsStrict checks the fake itself: unknown and missing fields are refused, as Ark does.
func TestFakeIsStrict(t *testing.T) {
	f := fake.New()
	defer f.Close()
	post := func(path, body string) int {
		req, _ := http.NewRequest(http.MethodPost, f.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fake.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for body, want := range map[string]int{
		`{"model":"m","prompt":"p","colour":"red"}`: 400,
		`{"prompt":"p"}`: 400,
		`{"model":"m","prompt":"p","size":"10x10"}`:                                   400,
		`{"model":"m","prompt":"p","size":"2048x2048","watermark":false}`:             200,
		`{"model":"m","prompt":"p","image":"not a url","response_format":"b64_json"}`: 400,
	} {
		if got := post("/images/generations", body); got != want {
			t.Errorf("images %s: %d, want %d", body, got, want)
		}
	}
	for body, want := range map[string]int{
		`{"model":"m","content":[{"type":"text","text":"p"}],"seconds":5}`:                         400,
		`{"model":"m","content":[]}`:                                                               400,
		`{"model":"m","content":[{"type":"image_url","image_url":{"url":"u"},"role":"middle"}]}`:   400,
		`{"model":"m","content":[{"type":"text","text":"p"}],"resolution":"4k"}`:                   400,
		`{"model":"m","content":[{"type":"text","text":"p"}],"duration":5,"resolution":"480p"}`:    200,
		`{"model":"m","content":[{"type":"text","text":"p"},{"type":"image_url","image_url":{}}]}`: 400,
	} {
		if got := post("/contents/generations/tasks", body); got != want {
			t.Errorf("tasks %s: %d, want %d", body, got, want)
		}
	}
}

func TestConfigOfTheArkProtocol(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"upstreams:\n  - name: a\n    provider: volcengine\n    media: image\n    family: seedream\n    protocol: ark\n    api_key: k\n", "u.yaml:2: upstreams[0].model: is required for the ark protocol"},
		{"upstreams:\n  - name: a\n    provider: volcengine\n    media: image\n    family: seedream\n    protocol: ark\n    model: m\n", "u.yaml:2: upstreams[0].api_key: is required for the ark protocol"},
		{"upstreams:\n  - name: a\n    provider: volcengine\n    media: image\n    family: seedream\n    protocol: ark\n    model: m\n    api_key: k\n    capabilities: [mask]\n", `u.yaml:9: upstreams[0].capabilities: the ark protocol cannot honour "mask" for image (it can: reference_images, large)`},
		{"upstreams:\n  - name: a\n    provider: volcengine\n    media: chat\n    protocol: ark\n    model: m\n    api_key: k\n", "u.yaml:4: upstreams[0].media: the ark protocol serves image and video, not chat"},
		{"upstreams:\n  - name: a\n    provider: volcengine\n    media: image\n    family: f\n    protocol: ark\n    model: m\n    api_key: k\n    secret_key: s\n", "u.yaml:9: upstreams[0].secret_key: is not used by the ark protocol"},
	} {
		if _, err := upstream.Parse("u.yaml", []byte(c.yaml)); err == nil || err.Error() != c.want {
			t.Errorf("error = %v\n want %s", err, c.want)
		}
	}
	cfgs, err := upstream.Parse("u.yaml", []byte("upstreams:\n  - name: a\n    provider: volcengine\n    media: image\n    family: seedream\n    protocol: ark\n    model: m\n    api_key: k\n"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := upstream.NewSet(cfgs)
	if err != nil || set.All[0].BaseURL != ark.DefaultBaseURL {
		t.Fatalf("set %v, base URL %q", err, set.All[0].BaseURL)
	}
}
