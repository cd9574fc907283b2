package kling_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
	"studio/jobs/upstream/kling"
	"studio/jobs/upstream/kling/fake"
)

func newUpstream(t *testing.T, f *fake.Server, media upstream.Media, ak string, caps ...upstream.Capability) *upstream.Upstream {
	t.Helper()
	cfg := upstream.Config{Name: "kling-" + string(media), Provider: "kuaishou", Media: media, Family: "kling", Protocol: kling.Protocol,
		BaseURL: f.URL, APIKey: ak, SecretKey: fake.SecretKey, Model: "kling-v2-1", Capabilities: caps, SoftTimeout: 5 * time.Second}
	if media == upstream.MediaVideo {
		// kling-v2-1 is an image and image-to-video model; text2video lists kling-v2-1-master.
		cfg.Family, cfg.Model, cfg.Tiers = "", "kling-v2-1-master", []string{upstream.TierA20Fast}
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

func TestTokenIsAnHS256JWTOfTheAccessKey(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tok := kling.Token("ak", "sk", now)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %s", tok)
	}
	head, _ := base64.RawURLEncoding.DecodeString(parts[0])
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if string(head) != `{"alg":"HS256","typ":"JWT"}` || canonical(claims) != `{"exp":1800001800,"iss":"ak","nbf":1799999995}` {
		t.Fatalf("head %s claims %s", head, claims)
	}
	// A known vector: HMAC-SHA256 over head.claims with the secret key (checked by the fake as well).
	if tok2 := kling.Token("ak", "other", now); tok2 == tok || strings.Split(tok2, ".")[1] != parts[1] {
		t.Fatal("the signature does not depend on the secret key alone")
	}
}

func TestRequestsAreExactlyKlings(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	img := newUpstream(t, f, upstream.MediaImage, fake.AccessKey, upstream.CapReferenceImages, upstream.CapLarge)
	ref := fakeupstream.PNG("ref")
	task, err := img.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaImage, Ref: "j-1",
		Image: upstream.ImageRequest{Prompt: "a cat", Ratio: "3:4", Resolution: "2k", ReferenceImages: [][]byte{ref}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"aspect_ratio":"3:4","image":"` + base64.StdEncoding.EncodeToString(ref) + `","model_name":"kling-v2-1","n":1,"prompt":"a cat","resolution":"2k"}`
	if got := f.Requests(http.MethodPost, "/v1/images/generations"); len(got) != 1 || canonical(got[0].Body) != want {
		t.Fatalf("image body %s", got[0].Body)
	}
	if task.Status != upstream.TaskQueued || !strings.HasPrefix(task.ID, "images/generations/") {
		t.Fatalf("task %+v", task)
	}
	vid := newUpstream(t, f, upstream.MediaVideo, fake.AccessKey, upstream.CapImages)
	if _, err := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Ref: "v-1",
		Video: upstream.VideoRequest{Prompt: "waves", Ratio: "9:16", Resolution: "1080p", Duration: 10}}); err != nil {
		t.Fatal(err)
	}
	want = `{"aspect_ratio":"9:16","duration":"10","external_task_id":"v-1","mode":"pro","model_name":"kling-v2-1-master","prompt":"waves"}`
	if got := f.Requests(http.MethodPost, "/v1/videos/text2video"); len(got) != 1 || canonical(got[0].Body) != want {
		t.Fatalf("text2video body %s", got[0].Body)
	}
	if _, err := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Ref: "v-2",
		Video: upstream.VideoRequest{Prompt: "waves", Ratio: "16:9", Resolution: "720p", Duration: 5, Images: []string{"https://a/1.png", "https://a/2.png"}}}); err != nil {
		t.Fatal(err)
	}
	want = `{"duration":"5","external_task_id":"v-2","image":"https://a/1.png","image_tail":"https://a/2.png","mode":"std","model_name":"kling-v2-1-master","prompt":"waves"}`
	if got := f.Requests(http.MethodPost, "/v1/videos/image2video"); len(got) != 1 || canonical(got[0].Body) != want {
		t.Fatalf("image2video body %s", got[0].Body)
	}
	// A data: URL is sent as bare Base64 (Kling refuses the prefix); no ratio is Kling's default 16:9.
	png := base64.StdEncoding.EncodeToString([]byte("png"))
	if _, err := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Ref: "v-3",
		Video: upstream.VideoRequest{Prompt: "waves", Duration: 5, Images: []string{"data:image/png;base64," + png}}}); err != nil {
		t.Fatal(err)
	}
	want = `{"duration":"5","external_task_id":"v-3","image":"` + png + `","mode":"std","model_name":"kling-v2-1-master","prompt":"waves"}`
	if got := f.Requests(http.MethodPost, "/v1/videos/image2video"); len(got) != 2 || canonical(got[1].Body) != want {
		t.Fatalf("image2video body %s", got[len(got)-1].Body)
	}
	if _, err := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Ref: "v-4", Video: upstream.VideoRequest{Prompt: "w", Duration: 5}}); err != nil {
		t.Fatal(err)
	}
	if got := f.Requests(http.MethodPost, "/v1/videos/text2video"); len(got) != 2 || !strings.Contains(string(got[1].Body), `"aspect_ratio":"16:9"`) {
		t.Fatalf("text2video body %s", got[len(got)-1].Body)
	}
	// A length Kling does not make is not served (routing moves on), never silently changed.
	_, err = vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "w", Duration: 8}})
	if upstream.ClassOf(err) != upstream.ClassCapability {
		t.Fatalf("an 8 s video = %v", err)
	}
}

func TestPollingFindingAndDownloading(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	vid := newUpstream(t, f, upstream.MediaVideo, fake.AccessKey)
	task, err := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Ref: "ref-7", Video: upstream.VideoRequest{Prompt: "w", Duration: 5}})
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
		t.Fatalf("states %v outputs %v", states, last.Outputs)
	}
	found, err := vid.Tasks().(upstream.Finder).Find(ctx, upstream.MediaVideo, "ref-7")
	if err != nil || found == nil || found.ID != task.ID {
		t.Fatalf("find = %+v, %v", found, err)
	}
	if none, err := vid.Tasks().(upstream.Finder).Find(ctx, upstream.MediaVideo, "ref-unknown"); err != nil || none != nil {
		t.Fatalf("find of an unknown reference = %+v, %v", none, err)
	}
	rc, err := vid.Tasks().Open(ctx, last.Outputs[0])
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	refused, _ := vid.Tasks().Submit(ctx, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "[refuse-output]", Duration: 5}})
	for i := 0; i < 5; i++ {
		last, _ = vid.Tasks().Poll(ctx, upstream.MediaVideo, refused.ID)
	}
	if last.Status != upstream.TaskFailed || last.Err.Class != upstream.ClassRefused {
		t.Fatalf("refused output %+v", last)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	f := fake.New()
	defer f.Close()
	ctx := context.Background()
	req := upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "w", Duration: 5}}
	for _, c := range []struct {
		name  string
		ak    string
		fault *faketask.Fault
		req   upstream.TaskRequest
		class upstream.Class
	}{
		{"revoked", fake.RevokedAccessKey, nil, req, upstream.ClassRevoked},
		{"wrong key pair", "someone-else", nil, req, upstream.ClassRevoked},
		{"arrears", fake.ArrearsAccessKey, nil, req, upstream.ClassUnpaid},
		{"rate", fake.AccessKey, &faketask.Fault{Status: 429, RetryAfter: "2", Body: `{"code":1302,"message":"rate limit"}`}, req, upstream.ClassTransient},
		{"server", fake.AccessKey, &faketask.Fault{Status: 500, Body: `{"code":5000,"message":"internal"}`}, req, upstream.ClassTransient},
		{"concurrency", fake.AccessKey, &faketask.Fault{Status: 429, Body: `{"code":1303,"message":"parallel task over resource pack limit"}`}, req, upstream.ClassTransient},
		{"resource pack", fake.AccessKey, &faketask.Fault{Status: 429, Body: `{"code":1102,"message":"resource pack exhausted"}`}, req, upstream.ClassUnpaid},
		{"account exception", fake.AccessKey, &faketask.Fault{Status: 429, Body: `{"code":1100,"message":"account exception"}`}, req, upstream.ClassRevoked},
		{"ip whitelist", fake.AccessKey, &faketask.Fault{Status: 429, Body: `{"code":1304,"message":"ip whitelist"}`}, req, upstream.ClassRevoked},
		{"no permission", fake.AccessKey, &faketask.Fault{Status: 403, Body: `{"code":1103,"message":"no permission"}`}, req, upstream.ClassRevoked},
		{"refused", fake.AccessKey, nil, upstream.TaskRequest{Media: upstream.MediaVideo, Video: upstream.VideoRequest{Prompt: "[refuse]", Duration: 5}}, upstream.ClassRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.fault != nil {
				f.Fail(*c.fault)
			}
			_, err := newUpstream(t, f, upstream.MediaVideo, c.ak).Tasks().Submit(ctx, c.req)
			var ue *upstream.Error
			if !errors.As(err, &ue) || ue.Class != c.class {
				t.Fatalf("err %v, want %s", err, c.class)
			}
		})
	}
	if err := newUpstream(t, f, upstream.MediaVideo, fake.AccessKey).Probe(ctx); err != nil {
		t.Fatalf("probe %v", err)
	}
	if err := newUpstream(t, f, upstream.MediaVideo, fake.RevokedAccessKey).Probe(ctx); upstream.ClassOf(err) != upstream.ClassRevoked {
		t.Fatalf("probe with a revoked key %v", err)
	}
}

func TestConfigNeedsTheKeyPair(t *testing.T) {
	_, err := upstream.Parse("u.yaml", []byte("upstreams:\n  - name: k\n    provider: kuaishou\n    media: video\n    protocol: kling\n    api_key: ak\n    model: kling-v2-1\n    tiers: [vidA-2-0-fast-260801]\n"))
	if err == nil || err.Error() != "u.yaml:2: upstreams[0].secret_key: is required for the kling protocol" {
		t.Fatalf("err %v", err)
	}
}
