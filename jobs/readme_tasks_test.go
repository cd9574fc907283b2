package jobs_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"studio/jobs/upstream"
	arkfake "studio/jobs/upstream/ark/fake"
	dsfake "studio/jobs/upstream/dashscope/fake"
	klingfake "studio/jobs/upstream/kling/fake"
	"studio/models"
)

// readmeExample returns the README's upstreams example of a protocol, with every base_url pointed at url.
func readmeExample(t *testing.T, protocol, url string) []upstream.Config {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "\n## Upstreams: connecting AI providers")
	if start < 0 {
		t.Fatal("README.md has no upstreams section")
	}
	doc = doc[start+1:]
	if end := strings.Index(doc, "\n## "); end > 0 {
		doc = doc[:end]
	}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		if !strings.Contains(m[1], "protocol: "+protocol+"\n") {
			continue
		}
		text := regexp.MustCompile(`base_url: \S+`).ReplaceAllString(m[1], "base_url: "+url)
		cfgs, err := upstream.Parse("README.md", []byte(text))
		if err != nil {
			t.Fatalf("the README's %s example is rejected: %v", protocol, err)
		}
		return cfgs
	}
	t.Fatalf("the README has no upstreams example of the %s protocol", protocol)
	return nil
}

// TestReadmeUpstreamsArkExampleRunsAnImageAndAVideo loads the README's Ark example (its key from the
// environment) and runs an image and a video through studio against the Ark fake.
func TestReadmeUpstreamsArkExampleRunsAnImageAndAVideo(t *testing.T) {
	f := arkfake.New()
	t.Cleanup(f.Close)
	t.Setenv("ARK_API_KEY", arkfake.Key)
	e := newTaskEnv(t, readmeExample(t, "ark", f.URL)...)
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a lighthouse"), Model: "seedream"}).ID))
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("waves"), Model: upstream.TierA20Fast}).ID, models.VideoDone, models.VideoFailed))
	for _, r := range f.Requests(http.MethodPost, "") {
		if r.Header.Get("Authorization") != "Bearer "+arkfake.Key {
			t.Fatalf("%s sent %q", r.Path, r.Header.Get("Authorization"))
		}
	}
	if img := f.Requests(http.MethodPost, "/images/generations"); len(img) != 1 || img[0].JSON()["model"] != "doubao-seedream-4-0-250828" {
		t.Fatalf("image requests %v", img)
	}
	if vid := f.Requests(http.MethodPost, "/contents/generations/tasks"); len(vid) != 1 || vid[0].JSON()["model"] != "doubao-seedance-1-5-pro-251215" {
		t.Fatalf("video requests %v", vid)
	}
}

// TestReadmeUpstreamsKlingExampleRunsAnImageAndAVideo does the same with the Kling example.
func TestReadmeUpstreamsKlingExampleRunsAnImageAndAVideo(t *testing.T) {
	f := klingfake.New()
	t.Cleanup(f.Close)
	t.Setenv("KLING_ACCESS_KEY", klingfake.AccessKey)
	t.Setenv("KLING_SECRET_KEY", klingfake.SecretKey)
	e := newTaskEnv(t, readmeExample(t, "kling", f.URL)...)
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a tea cup"), Model: "kling"}).ID))
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("a kite"), Model: upstream.TierA20Fast}).ID, models.VideoDone, models.VideoFailed))
	if n := len(f.Requests(http.MethodPost, "/v1/")); n != 2 {
		t.Fatalf("%d submissions, want 2", n)
	}
}

// TestReadmeUpstreamsTableNamesEveryProtocol fails when a registered protocol has no row in the README's
// table of task protocols.
func TestReadmeUpstreamsTableNamesEveryProtocol(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range upstream.KnownProtocols()[2:] {
		if !strings.Contains(string(data), "| `"+string(p)+"` |") {
			t.Errorf("the README's table of task protocols has no row for %s", p)
		}
	}
}

// TestReadmeUpstreamsDashScopeExampleRunsAnImageAndAVideo does the same with the DashScope example.
func TestReadmeUpstreamsDashScopeExampleRunsAnImageAndAVideo(t *testing.T) {
	f := dsfake.New()
	t.Cleanup(f.Close)
	t.Setenv("DASHSCOPE_API_KEY", dsfake.Key)
	e := newTaskEnv(t, readmeExample(t, "dashscope", f.URL)...)
	e.expectImageDone(e.waitJob(e.image(models.GenerateRequest{Prompt: ptr("a tea cup"), Model: "wan"}).ID))
	e.expectVideoDone(e.waitVideo(e.video(models.VideoRequest{Prompt: ptr("a kite"), Model: upstream.TierA25Pro, GenerateAudio: true}).ID, models.VideoDone, models.VideoFailed))
	posts := f.Requests(http.MethodPost, "/services/aigc/")
	if len(posts) != 2 || posts[1].JSON()["model"] != "wan2.5-t2v-preview" || posts[1].JSON()["parameters"].(map[string]any)["audio"] != true {
		t.Fatalf("submissions %v", posts)
	}
}
