package fal_test

import (
	"bytes"
	"context"
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
	"studio/jobs/upstream/fal"
	"studio/jobs/upstream/fal/fake"
)

const (
	fluxDev = "fal-ai/flux/dev"
	t2v     = "fal-ai/bytedance/seedance/v1/lite/text-to-video"
	i2v     = "fal-ai/bytedance/seedance/v1/lite/image-to-video"
)

func newUpstream(t *testing.T, f *fake.Server, media upstream.Media, model, key string, caps ...upstream.Capability) *upstream.Upstream {
	t.Helper()
	cfg := upstream.Config{Name: "fal-" + string(media), Provider: "fal", Media: media, Family: "flux", Protocol: fal.Protocol,
		BaseURL: f.URL, APIKey: key, Model: model, Capabilities: caps, SoftTimeout: 5 * time.Second}
	if media == upstream.MediaVideo {
		cfg.Family, cfg.Tiers = "", []string{upstream.TierA20Fast}
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

func run(t *testing.T, u *upstream.Upstream, m upstream.Media, id string) (*upstream.Task, []string) {
	t.Helper()
	var states []string
	var last *upstream.Task
	for i := 0; i < 10 && (last == nil || !last.Status.Ended()); i++ {
		var err error
		if last, err = u.Tasks().Poll(context.Background(), m, id); err != nil {
			t.Fatal(err)
		}
		states = append(states, string(last.Status))
	}
	return last, states
}

func TestImageRequestQueueAndResult(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaImage, fluxDev, fake.Key)
	ctx := context.Background()
	task, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaImage, Ref: "job-1", Image: upstream.ImageRequest{Prompt: "a red fox", Ratio: "16:9", Quality: "high"}})
	if err != nil {
		t.Fatal(err)
	}
	// The stored id is the status_url's path: the app (not the model's endpoint path) and the request.
	if !strings.HasPrefix(task.ID, "fal-ai/flux/requests/764cabcf-") || task.Status != upstream.TaskQueued {
		t.Fatalf("task %+v", task)
	}
	reqs := f.Requests(http.MethodPost, "/fal-ai/flux/dev")
	if len(reqs) != 1 || canonical(t, reqs[0].Body) != `{"image_size":{"height":576,"width":1024},"num_images":1,"prompt":"a red fox"}` {
		t.Fatalf("requests %+v", reqs)
	}
	if h := reqs[0].Header; h.Get("Authorization") != "Key "+fake.Key || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", h)
	}
	last, states := run(t, u, upstream.MediaImage, task.ID)
	if strings.Join(states, ",") != "queued,running,running,succeeded" {
		t.Fatalf("states %v", states)
	}
	polls := f.Requests(http.MethodGet, "/"+task.ID+"/status?logs=1")
	results := f.Requests(http.MethodGet, "/"+task.ID)
	if len(polls) != 4 || len(results) != 5 || results[4].Path != "/"+task.ID || results[4].Header.Get("Authorization") != "Key "+fake.Key {
		t.Fatalf("%d polls, %d GETs", len(polls), len(results))
	}
	rc, err := u.Tasks().Open(ctx, last.Outputs[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, fakeupstream.PNG("a red fox")) {
		t.Fatalf("downloaded %d bytes", len(b))
	}
	if dl := f.Requests(http.MethodGet, "/files/"); len(dl) != 1 || dl[0].Header.Get("Authorization") != "" {
		t.Fatalf("download %+v", dl)
	}
}

func TestVideoRequestProgressAndCancel(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	u := newUpstream(t, f, upstream.MediaVideo, i2v, fake.Key, upstream.CapImages)
	task, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "waves", Tier: upstream.TierA20Fast,
		Ratio: "16:9", Resolution: "720P", Duration: 5, Images: []string{"https://cdn.example/first.png"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"aspect_ratio":"16:9","duration":"5","image_url":"https://cdn.example/first.png","prompt":"waves","resolution":"720p"}`
	if reqs := f.Requests(http.MethodPost, "/"+i2v); len(reqs) != 1 || canonical(t, reqs[0].Body) != want {
		t.Fatalf("body %s\nwant %s", reqs[0].Body, want)
	}
	if !strings.HasPrefix(task.ID, "fal-ai/bytedance/requests/") {
		t.Fatalf("task id %s", task.ID)
	}
	f.SetPolls(1, 1000)
	var progress []int
	for i := 0; i < 4; i++ {
		st, err := u.Tasks().Poll(ctx, upstream.MediaVideo, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		progress = append(progress, st.Progress)
	}
	if progress[0] != 0 || progress[1] != 10 || progress[3] != 30 {
		t.Fatalf("progress %v, want the runner's tqdm percentages", progress)
	}
	if err := u.Tasks().Cancel(ctx, upstream.MediaVideo, task.ID); err != nil {
		t.Fatal(err)
	}
	if c := f.Requests(http.MethodPut, "/"+task.ID+"/cancel"); len(c) != 1 || c[0].Header.Get("Authorization") != "Key "+fake.Key {
		t.Fatalf("cancel requests %v", c)
	}
	if got, _ := f.Peek(strings.TrimPrefix(task.ID, "fal-ai/bytedance/requests/")); got.State != faketask.Cancelled {
		t.Fatalf("state %s", got.State)
	}
	// A second cancel finds it ended (400 ALREADY_COMPLETED): not an error.
	if err := u.Tasks().Cancel(ctx, upstream.MediaVideo, task.ID); err != nil {
		t.Fatalf("second cancel: %v", err)
	}
	if st, err := u.Tasks().Poll(ctx, upstream.MediaVideo, task.ID); err != nil || st.Status != upstream.TaskFailed {
		t.Fatalf("after cancel %+v %v", st, err)
	}
	// An image-to-video model id takes only requests with a picture.
	for _, in := range []upstream.VideoRequest{{Prompt: "p"}, {Prompt: "p", Audios: []string{"https://a/a.mp3"}}, {Prompt: "p", Images: []string{"https://a/1", "https://a/2"}}} {
		if _, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: in}); upstream.ClassOf(err) != upstream.ClassCapability {
			t.Fatalf("%+v: %v", in, err)
		}
	}
	if n := len(f.Requests(http.MethodPost, "")); n != 1 {
		t.Fatalf("%d submissions", n)
	}
}

func TestFailuresAndRefusals(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaVideo, t2v, fake.Key)
	for prompt, class := range map[string]upstream.Class{"[refuse] x": upstream.ClassRefused, "[refuse-output] x": upstream.ClassRefused, "[fail] x": upstream.ClassOther} {
		task, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: prompt, Duration: 5}})
		if err != nil {
			t.Fatal(err)
		}
		if last, _ := run(t, u, upstream.MediaVideo, task.ID); last.Status != upstream.TaskFailed || last.Err == nil || last.Err.Class != class {
			t.Errorf("%s: %+v %v", prompt, last, last.Err)
		}
	}
	// A 429 or a bare 5xx on the result is the queue's own: polled again, not a failure.
	task, _ := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "p", Duration: 5}})
	f.SetPolls(0, 0)
	f.Fail(faketask.Fault{Status: 502, Method: http.MethodGet, Path: "/requests/", Body: "<html>bad gateway</html>"})
	if _, err := u.Tasks().Poll(context.Background(), upstream.MediaVideo, task.ID); upstream.ClassOf(err) != upstream.ClassTransient {
		t.Fatalf("a gateway error = %v", err)
	}
	if last, _ := run(t, u, upstream.MediaVideo, task.ID); last.Status != upstream.TaskSucceeded || !strings.HasSuffix(last.Outputs[0].URL, "/output.mp4") {
		t.Fatalf("after the gateway error %+v", last)
	}
	if _, err := u.Tasks().Poll(context.Background(), upstream.MediaVideo, "fal-ai/bytedance/requests/nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("poll of an unknown request = %v", err)
	}
	if _, err := u.Tasks().Poll(context.Background(), upstream.MediaVideo, "../x/requests/y"); err == nil {
		t.Fatal("a path outside the queue was polled")
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
		class upstream.Class
		retry time.Duration
	}{
		{"unknown key", "nope:nope", nil, upstream.ClassRevoked, 0},
		{"revoked key", fake.RevokedKey, nil, upstream.ClassRevoked, 0},
		{"exhausted balance", fake.LockedKey, nil, upstream.ClassUnpaid, 0},
		{"admin lock", fake.Key, &faketask.Fault{Status: 403, Body: `{"detail":"User is locked. Reason: Admin lock. Please contact support@fal.ai."}`}, upstream.ClassRevoked, 0},
		{"rate limited", fake.Key, &faketask.Fault{Status: 429, RetryAfter: "2", Body: `{"detail":"Too many requests"}`}, upstream.ClassTransient, 2 * time.Second},
		{"server error", fake.Key, &faketask.Fault{Status: 503, Body: `{"detail":"Service unavailable"}`}, upstream.ClassTransient, 0},
		{"refused at submission", fake.Key, &faketask.Fault{Status: 422, Body: fake.ContentPolicyBody}, upstream.ClassRefused, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.fault != nil {
				f.Fail(*c.fault)
			}
			_, err := newUpstream(t, f, upstream.MediaVideo, t2v, c.key).Tasks().Submit(ctx, video)
			var ue *upstream.Error
			if !errors.As(err, &ue) || ue.Class != c.class || ue.RetryAfter != c.retry || upstream.UnknownOutcome(err) {
				t.Fatalf("err = %v (%+v), want class %s retry %s", err, ue, c.class, c.retry)
			}
		})
	}
	if _, err := newUpstream(t, f, upstream.MediaVideo, "fal-ai/unknown-model", fake.Key).Tasks().Submit(ctx, video); upstream.ClassOf(err) != upstream.ClassCapability {
		t.Fatalf("unknown model: %v", err)
	}
	if err := newUpstream(t, f, upstream.MediaVideo, t2v, fake.Key).Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	for key, class := range map[string]upstream.Class{fake.RevokedKey: upstream.ClassRevoked, fake.LockedKey: upstream.ClassUnpaid} {
		if err := newUpstream(t, f, upstream.MediaVideo, t2v, key).Probe(ctx); upstream.ClassOf(err) != class {
			t.Fatalf("probe with %s = %v", key, err)
		}
	}
	if probes := f.Requests(http.MethodGet, "/fal-ai/bytedance/requests/"+fal.ProbeRequestID+"/status"); len(probes) != 3 {
		t.Fatalf("%d probes", len(probes))
	}
	if n := len(f.Requests(http.MethodPost, "")); n != len(cases)+1 {
		t.Fatalf("%d submissions", n)
	}
}

func TestAppOfAModelID(t *testing.T) {
	for model, want := range map[string]string{"fal-ai/flux/dev": "fal-ai/flux", "fal-ai/flux-pro/v1.1-ultra": "fal-ai/flux-pro",
		"fal-ai/kling-video/v2.1/standard/image-to-video": "fal-ai/kling-video", "workflows/acme/my-flow/run": "workflows/acme/my-flow", "acme/app": "acme/app"} {
		if got := fal.App(model); got != want {
			t.Errorf("App(%s) = %s, want %s", model, got, want)
		}
	}
	if _, err := upstream.NewSet([]upstream.Config{{Name: "x", Provider: "fal", Media: upstream.MediaImage, Family: "f", Protocol: fal.Protocol,
		APIKey: "k", Model: "flux", SoftTimeout: time.Second}}); err == nil || !strings.Contains(err.Error(), "fal model id") {
		t.Fatalf("model flux: %v", err)
	}
}

// TestFakeIsStrict checks the fake itself: fields a model does not take are refused, as fal does.
func TestFakeIsStrict(t *testing.T) {
	f := fake.New()
	defer f.Close()
	post := func(path, body string) int {
		req, _ := http.NewRequest(http.MethodPost, f.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Key "+fake.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for body, want := range map[string]int{
		`{"prompt":"p","image_size":{"width":1024,"height":768},"num_images":1}`: 200,
		`{"prompt":"p","image_size":"landscape_16_9"}`:                           200,
		`{"prompt":"p","size":"1024x1024"}`:                                      422,
		`{"image_size":"square"}`:                                                422,
		`{"prompt":"p","image_size":{"width":1024}}`:                             422,
	} {
		if got := post("/"+fluxDev, body); got != want {
			t.Errorf("flux %s: %d, want %d", body, got, want)
		}
	}
	for body, want := range map[string]int{
		`{"prompt":"p","duration":"5","resolution":"720p"}`: 200,
		`{"prompt":"p","duration":5}`:                       422,
		`{"prompt":"p","image_url":"https://a/x.png"}`:      422,
	} {
		if got := post("/"+t2v, body); got != want {
			t.Errorf("t2v %s: %d, want %d", body, got, want)
		}
	}
	if got := post("/"+i2v, `{"prompt":"p"}`); got != 422 {
		t.Errorf("i2v without image_url: %d", got)
	}
	if resp, err := http.Get(f.URL + "/" + fluxDev); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %v %v", resp, err)
	}
}

func TestConfigOfTheFalProtocol(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"upstreams:\n  - name: a\n    provider: fal\n    media: image\n    family: f\n    protocol: fal\n    api_key: k\n", "u.yaml:2: upstreams[0].model: is required for the fal protocol"},
		{"upstreams:\n  - name: a\n    provider: fal\n    media: video\n    protocol: fal\n    model: a/b\n    api_key: k\n    tiers: [vidA-2-0-fast-260801]\n    capabilities: [generate_audio]\n", `u.yaml:9: upstreams[0].capabilities: the fal protocol cannot honour "generate_audio" for video (it can: images)`},
	} {
		if _, err := upstream.Parse("u.yaml", []byte(c.yaml)); err == nil || err.Error() != c.want {
			t.Errorf("error = %v\n want %s", err, c.want)
		}
	}
	cfgs, err := upstream.Parse("u.yaml", []byte("upstreams:\n  - name: a\n    provider: fal\n    media: image\n    family: f\n    protocol: fal\n    model: fal-ai/flux/dev\n    api_key: k\n"))
	if err != nil {
		t.Fatal(err)
	}
	if set, err := upstream.NewSet(cfgs); err != nil || set.All[0].BaseURL != fal.DefaultBaseURL {
		t.Fatalf("set %v", err)
	}
}
