package graph_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
)

// videoUpstream configures one video channel serving vidB-H3 on the fake upstream.
func videoUpstream(t *testing.T) (*fakeupstream.Server, envOption) {
	t.Helper()
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	cfgs := []upstream.Config{{Name: "vid-b", Provider: "prov-vid-b", Media: upstream.MediaVideo, Family: "fam-vid-b",
		Protocol: upstream.ProtocolOpenAI, BaseURL: fake.ChannelURL("vid-b"), APIKey: "test", Tiers: []string{upstream.TierBH3},
		SoftTimeout: 2 * time.Second, CostUSD: 0.05, Rating: 0.5}}
	return fake, func(c *envConfig) { c.opts.Upstreams = cfgs }
}

const videoFields = `id status model resolution duration credits progress videoUrl error createdAt updatedAt`

func TestVideoSubmitProgressAndCancel(t *testing.T) {
	fake, opt := videoUpstream(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 100)
	fake.SetVideoPolls(3)
	submit := `mutation($input: VideoInput!) { submitVideo(input: $input) { ` + videoFields + ` } }`
	input := map[string]any{"prompt": "a red fox at dawn", "model": "vidB-H3", "resolution": "2K", "duration": 6}
	task := e.gql(key, submit, map[string]any{"input": input}).must(t)["submitVideo"].(map[string]any)
	if task["credits"] != float64(18) || task["status"] != "pending" {
		t.Fatalf("submit = %v", task)
	}

	c := dial(t, e.srv.URL, transportWS, nil)
	c.mustInit(map[string]any{"X-API-Key": key})
	c.subscribe("v", `subscription($id: ID!) { videoProgress(id: $id) { `+videoFields+` } }`, map[string]any{"id": task["id"]})
	states := c.collect("v", 20*time.Second)
	last := states[len(states)-1]["videoProgress"].(map[string]any)
	if last["status"] != "done" || last["progress"] != float64(100) || !strings.HasSuffix(last["videoUrl"].(string), ".mp4") {
		t.Fatalf("last state = %v (of %d)", last, len(states))
	}
	raw, _ := json.Marshal(states)
	if strings.Contains(string(raw), "vid-b") || strings.Contains(string(raw), "a red fox") {
		t.Fatalf("the stream leaks the upstream or the prompt: %s", raw)
	}

	// The REST and GraphQL answers agree field by field.
	_, rest := e.rest("GET", "/api/videos?id="+task["id"].(string), key, nil)
	gq := e.gql(key, `query($id: ID!) { videoTask(id: $id) { `+videoFields+` } }`, map[string]any{"id": task["id"]}).must(t)["videoTask"].(map[string]any)
	renamed := map[string]any{"ok": true}
	names := map[string]string{"videoUrl": "video_url", "createdAt": "created_at", "updatedAt": "updated_at"}
	for k, v := range gq {
		if n, ok := names[k]; ok {
			k = n
		}
		renamed[k] = v
	}
	if !reflect.DeepEqual(renamed, rest) {
		t.Fatalf("video task:\nGraphQL %v\nREST    %v", renamed, rest)
	}

	// A second task is cancelled and refunded; the listing shows both.
	fake.SetVideoPolls(100000)
	second := e.gql(key, submit, map[string]any{"input": input}).must(t)["submitVideo"].(map[string]any)
	cancelled := e.gql(key, `mutation($id: ID!) { cancelVideo(id: $id) { status } }`, map[string]any{"id": second["id"]}).must(t)
	if cancelled["cancelVideo"].(map[string]any)["status"] != "cancelled" {
		t.Fatalf("cancel = %v", cancelled)
	}
	if _, b := e.rest("GET", "/api/balance", key, nil); b["credits"] != float64(82) {
		t.Fatalf("balance = %v, want 82 (the cancelled task refunded)", b["credits"])
	}
	page := e.gql(key, `{ videoTasks(pageSize: 1) { total pageNum pageSize items { id } } done: videoTasks(status: done) { total } }`, nil).must(t)
	if p := page["videoTasks"].(map[string]any); p["total"] != float64(2) || len(p["items"].([]any)) != 1 || page["done"].(map[string]any)["total"] != float64(1) {
		t.Fatalf("pages = %v", page)
	}
}
