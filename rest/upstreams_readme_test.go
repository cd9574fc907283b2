package rest_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
)

// TestReadmeUpstreamsExampleConnectsAnOpenAICompatibleProvider runs the service on the README's
// upstreams example, with only its base URL pointed at a local OpenAI-compatible server: an image, a
// chat answer and a video go through the configured channels with the key from the environment.
func TestReadmeUpstreamsExampleConnectsAnOpenAICompatibleProvider(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	doc = doc[strings.Index(doc, "\n## Upstreams: connecting AI providers"):]
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("no yaml example in the README's upstreams section")
	}
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	fake.SetVideoPolls(1)
	example := strings.ReplaceAll(m[1], "https://api.openai.com/v1", fake.URL)
	example = strings.ReplaceAll(example, "https://gateway.example.com/v1", fake.URL)
	t.Setenv("OPENAI_API_KEY", "sk-readme-example")
	t.Setenv("GATEWAY_API_KEY", "sk-readme-gateway")
	cfgs, err := upstream.Parse("README.md", []byte(example))
	if err != nil {
		t.Fatalf("README example: %v", err)
	}
	e := newEnv(t, func(c *envConfig) { c.opts.Upstreams = cfgs })
	_, key := e.tenant("Acme", 100)

	job := e.call("POST", "/api/generate", key, map[string]any{"prompt": "a lighthouse", "model": "openai-image"}).expect(t, 200).str("jobId")
	if r := e.waitJob(key, job); r.str("status") != "done" {
		t.Fatalf("image job: %s", r.Body)
	}
	img := fake.LastRequest("/v1/images/generations")
	if img.Model != "gpt-image-1" || img.Header.Get("Authorization") != "Bearer sk-readme-example" {
		t.Errorf("image request: model %q, Authorization %q", img.Model, img.Header.Get("Authorization"))
	}

	e.call("POST", "/api/chat", key, map[string]any{"message": "hello"}).expect(t, 200)
	if chat := fake.LastRequest("/v1/chat/completions"); chat.Model != "gpt-4o-mini" {
		t.Errorf("chat request model = %q, want gpt-4o-mini", chat.Model)
	}

	id := e.call("POST", "/api/videos", key, map[string]any{"prompt": "waves", "model": upstream.TierA20Fast, "duration": 5}).expect(t, 200).str("id")
	if r := e.waitVideo(key, id, "done", "failed"); r.str("status") != "done" {
		t.Fatalf("video task: %s", r.Body)
	}
	if v := fake.LastRequest("/v1/videos"); v.Model != "doubao-seedance-1-0-pro" || v.Header.Get("Authorization") != "Bearer sk-readme-gateway" {
		t.Errorf("video request: model %q, Authorization %q", v.Model, v.Header.Get("Authorization"))
	}
}
