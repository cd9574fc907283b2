package gemini_test

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
	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
	"studio/jobs/upstream/gemini"
	"studio/jobs/upstream/gemini/fake"
)

func newUpstream(t *testing.T, f *fake.Server, media upstream.Media, key string, caps ...upstream.Capability) *upstream.Upstream {
	t.Helper()
	cfg := upstream.Config{Name: "gemini-" + string(media), Provider: "google", Media: media, Family: "nano-banana", Protocol: gemini.Protocol,
		BaseURL: f.URL, APIKey: key, Model: "gemini-2.5-flash-image", Capabilities: caps, SoftTimeout: 5 * time.Second}
	if media == upstream.MediaVideo {
		cfg.Family, cfg.Model, cfg.Tiers = "", "veo-3.1-fast-generate-preview", []string{upstream.TierA20Fast}
	}
	set, err := upstream.NewSet([]upstream.Config{cfg})
	if err != nil {
		t.Fatal(err)
	}
	return set.All[0]
}

func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestImageRequestIsExactlyGenerateContent(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaImage, fake.Key, upstream.CapReferenceImages, upstream.CapLarge)
	ref := fakeupstream.PNG("ref")
	task, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaImage, Ref: "job-1",
		Image: upstream.ImageRequest{Prompt: "a red fox", Ratio: "16:9", Resolution: "2k", ReferenceImages: [][]byte{ref}}})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != upstream.TaskSucceeded || len(task.Outputs) != 1 || !bytes.Equal(task.Outputs[0].Data, fakeupstream.PNG("a red fox")) || task.Outputs[0].MIME != "image/png" {
		t.Fatalf("task = %+v", task)
	}
	reqs := f.Requests(http.MethodPost, "/v1beta/models/gemini-2.5-flash-image:generateContent")
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	want := `{"contents":[{"parts":[{"text":"a red fox"},{"inlineData":{"data":"` + base64.StdEncoding.EncodeToString(ref) + `","mimeType":"image/png"}}],"role":"user"}],` +
		`"generationConfig":{"imageConfig":{"aspectRatio":"16:9","imageSize":"2K"},"responseModalities":["IMAGE"]}}`
	if got := canonical(t, reqs[0].Body); got != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	h := reqs[0].Header
	if h.Get("X-Goog-Api-Key") != fake.Key || h.Get("Content-Type") != "application/json" || h.Get("Authorization") != "" || strings.Contains(reqs[0].Path, "key=") {
		t.Fatalf("headers %v path %s", h, reqs[0].Path)
	}
	// 1k and no ratio send no imageConfig at all.
	if _, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaImage, Image: upstream.ImageRequest{Prompt: "p"}}); err != nil {
		t.Fatal(err)
	}
	if got := canonical(t, f.Requests(http.MethodPost, ":generateContent")[1].Body); got != `{"contents":[{"parts":[{"text":"p"}],"role":"user"}],"generationConfig":{"responseModalities":["IMAGE"]}}` {
		t.Fatalf("plain body %s", got)
	}
	// What Gemini cannot do is a capability error, sent nowhere.
	for _, in := range []upstream.ImageRequest{{Prompt: "p", Ratio: "7:3"}, {Prompt: "p", Mask: []byte{1}, Image: ref}, {Prompt: "p", Background: "transparent"}} {
		if _, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaImage, Image: in}); upstream.ClassOf(err) != upstream.ClassCapability {
			t.Fatalf("%+v: %v", in, err)
		}
	}
	if n := len(f.Requests(http.MethodPost, "")); n != 2 {
		t.Fatalf("%d requests", n)
	}
}

func TestImageRefusalsAndFailures(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaImage, fake.Key)
	for prompt, class := range map[string]upstream.Class{"[refuse] x": upstream.ClassRefused, "[refuse-output] x": upstream.ClassRefused, "[fail] x": upstream.ClassOther} {
		_, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaImage, Image: upstream.ImageRequest{Prompt: prompt}})
		if upstream.ClassOf(err) != class || upstream.UnknownOutcome(err) {
			t.Errorf("%s: %v, want %s", prompt, err, class)
		}
	}
}

func TestVideoOperationRequestPollAndDownload(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaVideo, fake.Key, upstream.CapGenerateAudio)
	ctx := context.Background()
	task, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Ref: "v-1", Video: upstream.VideoRequest{
		Prompt: "waves at dusk", Tier: upstream.TierA20Fast, Ratio: "9:16", Resolution: "1080p", Duration: 8, GenerateAudio: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(task.ID, "models/veo-3.1-fast-generate-preview/operations/op") {
		t.Fatalf("task id %s", task.ID)
	}
	reqs := f.Requests(http.MethodPost, "/v1beta/models/veo-3.1-fast-generate-preview:predictLongRunning")
	want := `{"instances":[{"prompt":"waves at dusk"}],"parameters":{"aspectRatio":"9:16","durationSeconds":8,"resolution":"1080p"}}`
	if len(reqs) != 1 || canonical(t, reqs[0].Body) != want || reqs[0].Header.Get("X-Goog-Api-Key") != fake.Key {
		t.Fatalf("body\n got %s\nwant %s", reqs[0].Body, want)
	}
	var states []string
	var last *upstream.Task
	for i := 0; i < 6 && (last == nil || !last.Status.Ended()); i++ {
		if last, err = u.Tasks().Poll(ctx, upstream.MediaVideo, task.ID); err != nil {
			t.Fatal(err)
		}
		states = append(states, string(last.Status))
	}
	if strings.Join(states, ",") != "running,running,running,succeeded" {
		t.Fatalf("states %v", states)
	}
	if n := len(f.Requests(http.MethodGet, "/v1beta/"+task.ID)); n != 4 {
		t.Fatalf("%d polls of GET /v1beta/{name}", n)
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
	dl := f.Requests(http.MethodGet, ":download")
	if len(dl) != 1 || dl[0].Header.Get("X-Goog-Api-Key") != fake.Key || !strings.HasSuffix(dl[0].Path, ":download?alt=media") {
		t.Fatalf("download %+v", dl)
	}
	// A video URI on another host is fetched from the configured host, so the key never leaves it.
	if _, err := u.Tasks().Open(ctx, upstream.Output{URL: "https://evil.example/v1beta/files/" + strings.TrimPrefix(task.ID, "models/veo-3.1-fast-generate-preview/operations/") + ":download?alt=media"}); err != nil {
		t.Fatalf("open by file name: %v", err)
	}
	if _, err := u.Tasks().Open(ctx, upstream.Output{URL: "https://evil.example/steal"}); err == nil {
		t.Fatal("a URI without a file name was opened")
	}
	// Cancel is not offered by the Gemini API: nothing is sent.
	before := len(f.Requests("", ""))
	if err := u.Tasks().Cancel(ctx, upstream.MediaVideo, task.ID); err != nil || len(f.Requests("", "")) != before {
		t.Fatalf("cancel: %v", err)
	}
}

func TestVideoLimitsAreCapabilityErrors(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaVideo, fake.Key)
	for _, in := range []upstream.VideoRequest{
		{Prompt: "p", Duration: 5}, {Prompt: "p", Duration: 10}, {Prompt: "p", Duration: 6, Resolution: "1080p"},
		{Prompt: "p", Duration: 8, Ratio: "1:1"}, {Prompt: "p", Duration: 8, Resolution: "480p"},
		{Prompt: "p", Duration: 8, Images: []string{"https://a.example/1.png"}},
	} {
		if _, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaVideo, Video: in}); upstream.ClassOf(err) != upstream.ClassCapability {
			t.Errorf("%+v: %v", in, err)
		}
	}
	if n := len(f.Requests("", "")); n != 0 {
		t.Fatalf("%d requests", n)
	}
	if b, err := gemini.VideoBody("veo-2.0-generate-001", upstream.VideoRequest{Prompt: "p", Duration: 5, Resolution: "720p"}); err != nil {
		t.Fatalf("veo 2 at 5 s: %v", err)
	} else if out, _ := json.Marshal(b); string(out) != `{"instances":[{"prompt":"p"}],"parameters":{"durationSeconds":5}}` {
		t.Fatalf("veo 2 body %s", out)
	}
	if _, err := gemini.VideoBody("veo-2.0-generate-001", upstream.VideoRequest{Prompt: "p", Duration: 8, Resolution: "1080p"}); err == nil {
		t.Fatal("veo 2 at 1080p accepted")
	}
}

func TestVideoFailuresAndRefusals(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	u := newUpstream(t, f, upstream.MediaVideo, fake.Key)
	end := func(prompt string) *upstream.Task {
		task, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: prompt, Duration: 8}})
		if err != nil {
			t.Fatal(err)
		}
		var last *upstream.Task
		for i := 0; i < 8 && (last == nil || !last.Status.Ended()); i++ {
			if last, err = u.Tasks().Poll(ctx, upstream.MediaVideo, task.ID); err != nil {
				t.Fatal(err)
			}
		}
		return last
	}
	for prompt, class := range map[string]upstream.Class{"[refuse] x": upstream.ClassRefused, "[refuse-output] x": upstream.ClassRefused, "[fail] x": upstream.ClassOther} {
		if got := end(prompt); got.Status != upstream.TaskFailed || got.Err == nil || got.Err.Class != class {
			t.Errorf("%s: %+v", prompt, got)
		}
	}
	if _, err := u.Tasks().Poll(ctx, upstream.MediaVideo, "models/veo-3.1-fast-generate-preview/operations/nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("poll of an unknown operation = %v", err)
	}
	if _, err := u.Tasks().Poll(ctx, upstream.MediaVideo, "../../files/x"); err == nil {
		t.Fatal("a name outside operations was polled")
	}
}

func TestErrorsAreClassified(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	video := upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "p", Duration: 8}}
	image := upstream.TaskRequest{Media: upstream.MediaImage, Image: upstream.ImageRequest{Prompt: "p"}}
	cases := []struct {
		name  string
		key   string
		fault *faketask.Fault
		req   upstream.TaskRequest
		class upstream.Class
		retry time.Duration
	}{
		{"invalid key", "AIza-unknown", nil, video, upstream.ClassRevoked, 0},
		{"leaked key", fake.RevokedKey, nil, image, upstream.ClassRevoked, 0},
		{"no billing", fake.UnpaidKey, nil, video, upstream.ClassUnpaid, 0},
		{"rate limited with RetryInfo", fake.Key, &faketask.Fault{Status: 429, Body: fake.RateLimitBody}, video, upstream.ClassTransient, time.Second},
		{"rate limited with Retry-After", fake.Key, &faketask.Fault{Status: 429, RetryAfter: "3", Body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`}, image, upstream.ClassTransient, 3 * time.Second},
		{"prepaid credits depleted", fake.Key, &faketask.Fault{Status: 429, Body: `{"error":{"code":429,"message":"Your prepayment credits are depleted. Please go to AI Studio to manage your project and billing.","status":"RESOURCE_EXHAUSTED"}}`}, image, upstream.ClassUnpaid, 0},
		{"overloaded", fake.Key, &faketask.Fault{Status: 503, Body: fake.ServerErrorBody}, video, upstream.ClassTransient, 0},
		{"internal", fake.Key, &faketask.Fault{Status: 500, Body: `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`}, image, upstream.ClassTransient, 0},
		{"refused prompt", fake.Key, nil, upstream.TaskRequest{Media: upstream.MediaImage, Image: upstream.ImageRequest{Prompt: "[refuse] x"}}, upstream.ClassRefused, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.fault != nil {
				f.Fail(*c.fault)
			}
			_, err := newUpstream(t, f, c.req.Media, c.key).Tasks().Submit(ctx, c.req)
			var ue *upstream.Error
			if !errors.As(err, &ue) || ue.Class != c.class || ue.RetryAfter != c.retry || upstream.UnknownOutcome(err) {
				t.Fatalf("err = %v (%+v), want class %s retry %s", err, ue, c.class, c.retry)
			}
		})
	}
	if err := newUpstream(t, f, upstream.MediaVideo, fake.Key).Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := newUpstream(t, f, upstream.MediaVideo, fake.RevokedKey).Probe(ctx); upstream.ClassOf(err) != upstream.ClassRevoked {
		t.Fatalf("probe with a leaked key = %v", err)
	}
	if probes := f.Requests(http.MethodGet, "/v1beta/models/veo-3.1-fast-generate-preview"); len(probes) != 2 {
		t.Fatalf("%d probes", len(probes))
	}
}

// TestFakeIsStrict checks the fake itself: unknown and missing fields are refused, as Google does.
func TestFakeIsStrict(t *testing.T) {
	f := fake.New()
	defer f.Close()
	post := func(path, body string) int {
		req, _ := http.NewRequest(http.MethodPost, f.URL+path, strings.NewReader(body))
		req.Header.Set("X-Goog-Api-Key", fake.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	img := "/models/gemini-2.5-flash-image:generateContent"
	for body, want := range map[string]int{
		`{"contents":[{"parts":[{"text":"p"}]}],"generationConfig":{"responseModalities":["IMAGE"]}}`:                                     200,
		`{"contents":[{"parts":[{"text":"p"}]}],"generationConfig":{"responseModalities":["IMAGE"],"size":"1024x1024"}}`:                  400,
		`{"contents":[],"generationConfig":{"responseModalities":["IMAGE"]}}`:                                                             400,
		`{"contents":[{"parts":[{"text":"p"}]}],"generationConfig":{"responseModalities":["IMAGE"],"imageConfig":{"aspectRatio":"7:3"}}}`: 400,
		`{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"!!"}}]}]}`:                                                  400,
		`{"prompt":"p"}`: 400,
	} {
		if got := post(img, body); got != want {
			t.Errorf("generateContent %s: %d, want %d", body, got, want)
		}
	}
	vid := "/models/veo-3.1-generate-preview:predictLongRunning"
	for body, want := range map[string]int{
		`{"instances":[{"prompt":"p"}],"parameters":{"durationSeconds":8,"resolution":"4k"}}`:    200,
		`{"instances":[{"prompt":"p"}],"parameters":{"durationSeconds":5}}`:                      400,
		`{"instances":[{"prompt":"p"}],"parameters":{"durationSeconds":6,"resolution":"1080p"}}`: 400,
		`{"instances":[{"prompt":"p"}],"parameters":{"generateAudio":true}}`:                     400,
		`{"instances":[{}]}`: 400,
		`{"instances":[{"prompt":"p"}],"parameters":{"aspectRatio":"1:1"}}`: 400,
	} {
		if got := post(vid, body); got != want {
			t.Errorf("predictLongRunning %s: %d, want %d", body, got, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, f.URL+"/models/veo-3.1-generate-preview", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("no key: %v %v", resp, err)
	}
}

func TestConfigOfTheGeminiProtocol(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"upstreams:\n  - name: a\n    provider: google\n    media: image\n    family: f\n    protocol: gemini\n    api_key: k\n", "u.yaml:2: upstreams[0].model: is required for the gemini protocol"},
		{"upstreams:\n  - name: a\n    provider: google\n    media: image\n    family: f\n    protocol: gemini\n    model: m\n    api_key: k\n    capabilities: [transparent]\n", `u.yaml:9: upstreams[0].capabilities: the gemini protocol cannot honour "transparent" for image (it can: reference_images, large)`},
		{"upstreams:\n  - name: a\n    provider: google\n    media: video\n    protocol: gemini\n    model: m\n    api_key: k\n    tiers: [vidA-2-0-fast-260801]\n    capabilities: [images]\n", `u.yaml:9: upstreams[0].capabilities: the gemini protocol cannot honour "images" for video (it can: generate_audio)`},
		{"upstreams:\n  - name: a\n    provider: google\n    media: chat\n    protocol: gemini\n    model: m\n    api_key: k\n", "u.yaml:4: upstreams[0].media: the gemini protocol serves image and video, not chat"},
	} {
		if _, err := upstream.Parse("u.yaml", []byte(c.yaml)); err == nil || err.Error() != c.want {
			t.Errorf("error = %v\n want %s", err, c.want)
		}
	}
	cfgs, err := upstream.Parse("u.yaml", []byte("upstreams:\n  - name: a\n    provider: google\n    media: image\n    family: f\n    protocol: gemini\n    model: m\n    api_key: k\n"))
	if err != nil {
		t.Fatal(err)
	}
	if set, err := upstream.NewSet(cfgs); err != nil || set.All[0].BaseURL != gemini.DefaultBaseURL {
		t.Fatalf("set %v", err)
	}
}
