package replicate_test

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
	"studio/jobs/upstream/replicate"
	"studio/jobs/upstream/replicate/fake"
)

func newUpstream(t *testing.T, f *fake.Server, media upstream.Media, model, key string, caps ...upstream.Capability) *upstream.Upstream {
	t.Helper()
	cfg := upstream.Config{Name: "rep-" + string(media), Provider: "replicate", Media: media, Family: "flux", Protocol: replicate.Protocol,
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

// run polls a task until it ends and returns the states seen.
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

func TestImagePredictionOfAModel(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaImage, "black-forest-labs/flux-1.1-pro", fake.Key)
	ctx := context.Background()
	task, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaImage, Ref: "job-1", Image: upstream.ImageRequest{Prompt: "a red fox", Ratio: "16:9"}})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != upstream.TaskQueued || task.ID == "" {
		t.Fatalf("task %+v", task)
	}
	reqs := f.Requests(http.MethodPost, "/v1/models/black-forest-labs/flux-1.1-pro/predictions")
	if len(reqs) != 1 || canonical(t, reqs[0].Body) != `{"input":{"aspect_ratio":"16:9","prompt":"a red fox"}}` {
		t.Fatalf("requests %+v", reqs)
	}
	if h := reqs[0].Header; h.Get("Authorization") != "Bearer "+fake.Key || h.Get("Content-Type") != "application/json" || h.Get("Prefer") != "" {
		t.Fatalf("headers %v", h)
	}
	last, states := run(t, u, upstream.MediaImage, task.ID)
	if strings.Join(states, ",") != "queued,running,running,succeeded" || last.Progress != 100 {
		t.Fatalf("states %v", states)
	}
	// Polls go to the prediction's urls.get.
	if got := f.Requests(http.MethodGet, "/v1/predictions/"+task.ID); len(got) != 4 || got[0].Header.Get("Authorization") != "Bearer "+fake.Key {
		t.Fatalf("%d polls", len(got))
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
	if dl := f.Requests(http.MethodGet, "/delivery/"); len(dl) != 1 || dl[0].Header.Get("Authorization") != "" {
		t.Fatalf("download %+v", dl)
	}
}

func TestImagePredictionOfAVersionWithAListOutput(t *testing.T) {
	f := fake.New()
	defer f.Close()
	for _, model := range []string{"black-forest-labs/flux-schnell:" + fake.FluxSchnellVersion, fake.FluxSchnellVersion} {
		u := newUpstream(t, f, upstream.MediaImage, model, fake.Key)
		task, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaImage, Image: upstream.ImageRequest{Prompt: "p"}})
		if err != nil {
			t.Fatal(err)
		}
		if last, _ := run(t, u, upstream.MediaImage, task.ID); last.Status != upstream.TaskSucceeded || !strings.HasSuffix(last.Outputs[0].URL, "/out.png") {
			t.Fatalf("%s: %+v", model, last)
		}
	}
	reqs := f.Requests(http.MethodPost, "")
	want := `{"input":{"prompt":"p"},"version":"` + fake.FluxSchnellVersion + `"}`
	if len(reqs) != 2 || reqs[0].Path != "/v1/predictions" || canonical(t, reqs[0].Body) != want || canonical(t, reqs[1].Body) != want {
		t.Fatalf("requests %+v", reqs)
	}
	// A model that is neither owner/name nor a version is refused when the file is loaded.
	if _, err := upstream.NewSet([]upstream.Config{{Name: "x", Provider: "replicate", Media: upstream.MediaImage, Family: "f", Protocol: replicate.Protocol,
		APIKey: "k", Model: "flux", SoftTimeout: time.Second}}); err == nil || !strings.Contains(err.Error(), "owner/name") {
		t.Fatalf("model flux: %v", err)
	}
}

func TestVideoPredictionProgressAndCancel(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaVideo, "bytedance/seedance-1-lite", fake.Key, upstream.CapImages)
	ctx := context.Background()
	task, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "waves", Tier: upstream.TierA20Fast,
		Ratio: "16:9", Resolution: "720P", Duration: 5, Images: []string{"https://cdn.example/first.png", "https://cdn.example/last.png"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"input":{"aspect_ratio":"16:9","duration":5,"image":"https://cdn.example/first.png","last_frame_image":"https://cdn.example/last.png","prompt":"waves","resolution":"720p"}}`
	if reqs := f.Requests(http.MethodPost, "/v1/models/bytedance/seedance-1-lite/predictions"); len(reqs) != 1 || canonical(t, reqs[0].Body) != want {
		t.Fatalf("body %s\nwant %s", reqs[0].Body, want)
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
		t.Fatalf("progress %v, want the percentages of the logs", progress)
	}
	if err := u.Tasks().Cancel(ctx, upstream.MediaVideo, task.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Peek(task.ID); got.State != faketask.Cancelled {
		t.Fatalf("state %s", got.State)
	}
	if c := f.Requests(http.MethodPost, "/v1/predictions/"+task.ID+"/cancel"); len(c) != 1 || c[0].Header.Get("Authorization") != "Bearer "+fake.Key {
		t.Fatalf("cancel requests %v", c)
	}
	if st, _ := u.Tasks().Poll(ctx, upstream.MediaVideo, task.ID); st.Status != upstream.TaskCancelled {
		t.Fatalf("after cancel %s", st.Status)
	}
	if replicate.Progress("no bar\n 7%|▋ | 1/14 [00:01]\n 57%|█████▋ | 8/14 [00:04]\nfinishing") != 57 {
		t.Fatal("progress of the last bar")
	}
	// What cannot be sent is a capability error, sent nowhere.
	for _, in := range []upstream.VideoRequest{{Prompt: "p", Audios: []string{"https://a/a.mp3"}}, {Prompt: "p", Images: []string{"a", "b", "c"}}} {
		if _, err := u.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: in}); upstream.ClassOf(err) != upstream.ClassCapability {
			t.Fatalf("%+v: %v", in, err)
		}
	}
	if n := len(f.Requests(http.MethodPost, "/predictions")); n != 2 {
		t.Fatalf("%d POSTs", n)
	}
}

func TestFailuresAndRefusals(t *testing.T) {
	f := fake.New()
	defer f.Close()
	u := newUpstream(t, f, upstream.MediaVideo, "bytedance/seedance-1-lite", fake.Key)
	for prompt, class := range map[string]upstream.Class{"[refuse] x": upstream.ClassRefused, "[refuse-output] x": upstream.ClassRefused, "[fail] x": upstream.ClassOther} {
		task, err := u.Tasks().Submit(context.Background(), upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: prompt, Duration: 5}})
		if err != nil {
			t.Fatal(err)
		}
		if last, _ := run(t, u, upstream.MediaVideo, task.ID); last.Status != upstream.TaskFailed || last.Err == nil || last.Err.Class != class {
			t.Errorf("%s: %+v", prompt, last)
		}
	}
	if _, err := u.Tasks().Poll(context.Background(), upstream.MediaVideo, "unknown0"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("poll of an unknown prediction = %v", err)
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
		{"revoked token", fake.RevokedKey, nil, upstream.ClassRevoked, 0},
		{"no credit", fake.NoCreditKey, nil, upstream.ClassUnpaid, 0},
		{"throttled", fake.Key, &faketask.Fault{Status: 429, RetryAfter: "2", Body: fake.ThrottledBody}, upstream.ClassTransient, 2 * time.Second},
		{"server error", fake.Key, &faketask.Fault{Status: 502, Body: `<html>Bad gateway</html>`}, upstream.ClassTransient, 0},
		{"disabled account", fake.Key, &faketask.Fault{Status: 403, Body: `{"title":"Forbidden","detail":"Your account is disabled.","status":403}`}, upstream.ClassRevoked, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.fault != nil {
				f.Fail(*c.fault)
			}
			_, err := newUpstream(t, f, upstream.MediaVideo, "bytedance/seedance-1-lite", c.key).Tasks().Submit(ctx, video)
			var ue *upstream.Error
			if !errors.As(err, &ue) || ue.Class != c.class || ue.RetryAfter != c.retry || upstream.UnknownOutcome(err) {
				t.Fatalf("err = %v (%+v), want class %s retry %s", err, ue, c.class, c.retry)
			}
		})
	}
	if _, err := newUpstream(t, f, upstream.MediaVideo, "acme/unknown", fake.Key).Tasks().Submit(ctx, video); upstream.ClassOf(err) != upstream.ClassCapability {
		t.Fatalf("unknown model: %v", err)
	}
	if err := newUpstream(t, f, upstream.MediaVideo, "bytedance/seedance-1-lite", fake.Key).Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := newUpstream(t, f, upstream.MediaVideo, "bytedance/seedance-1-lite", fake.RevokedKey).Probe(ctx); upstream.ClassOf(err) != upstream.ClassRevoked {
		t.Fatalf("probe with a revoked token = %v", err)
	}
	if n := len(f.Requests(http.MethodGet, "/v1/account")); n != 2 {
		t.Fatalf("%d probes", n)
	}
}

// TestFakeIsStrict checks the fake itself: fields the model does not take are refused, as Replicate does.
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
	for path, cases := range map[string]map[string]int{
		"/models/bytedance/seedance-1-lite/predictions": {
			`{"input":{"prompt":"p","duration":5}}`:                                201,
			`{"input":{"prompt":"p","seconds":5}}`:                                 422,
			`{"input":{"duration":5}}`:                                             422,
			`{"input":{"prompt":"p","resolution":"4k"}}`:                           422,
			`{"input":{"prompt":"p","last_frame_image":"https://a/x.png"}}`:        422,
			`{"input":{"prompt":"p"},"colour":"red"}`:                              422,
			`{"version":"` + fake.FluxSchnellVersion + `","input":{"prompt":"p"}}`: 422,
		},
		"/predictions": {
			`{"version":"` + fake.FluxSchnellVersion + `","input":{"prompt":"p"}}`: 201,
			`{"input":{"prompt":"p"}}`: 422,
			`{"version":"0000000000000000000000000000000000000000000000000000000000000000","input":{"prompt":"p"}}`: 404,
		},
	} {
		for body, want := range cases {
			if got := post(path, body); got != want {
				t.Errorf("%s %s: %d, want %d", path, body, got, want)
			}
		}
	}
	if resp, err := http.Get(f.URL + "/account"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %v %v", resp, err)
	}
}

func TestConfigOfTheReplicateProtocol(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"upstreams:\n  - name: a\n    provider: replicate\n    media: image\n    family: f\n    protocol: replicate\n    api_key: k\n", "u.yaml:2: upstreams[0].model: is required for the replicate protocol"},
		{"upstreams:\n  - name: a\n    provider: replicate\n    media: image\n    family: f\n    protocol: replicate\n    model: a/b\n    api_key: k\n    capabilities: [reference_images]\n", `u.yaml:9: upstreams[0].capabilities: the replicate protocol cannot honour "reference_images" for image (it can: )`},
		{"upstreams:\n  - name: a\n    provider: replicate\n    media: video\n    protocol: replicate\n    model: a/b\n    api_key: k\n    tiers: [vidA-2-0-fast-260801]\n    capabilities: [generate_audio]\n", `u.yaml:9: upstreams[0].capabilities: the replicate protocol cannot honour "generate_audio" for video (it can: images)`},
	} {
		if _, err := upstream.Parse("u.yaml", []byte(c.yaml)); err == nil || err.Error() != c.want {
			t.Errorf("error = %v\n want %s", err, c.want)
		}
	}
	cfgs, err := upstream.Parse("u.yaml", []byte("upstreams:\n  - name: a\n    provider: replicate\n    media: image\n    family: f\n    protocol: replicate\n    model: a/b\n    api_key: k\n"))
	if err != nil {
		t.Fatal(err)
	}
	if set, err := upstream.NewSet(cfgs); err != nil || set.All[0].BaseURL != replicate.DefaultBaseURL {
		t.Fatalf("set %v", err)
	}
}
