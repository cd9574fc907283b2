package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/contract"
)

// videoChannels are the video channels videoUpstreams configures.
var videoChannels = []string{"vid-a", "vid-a2", "vid-b"}

// videoUpstreams starts the fake upstream with video channels: vid-a and vid-a2 serve the tier A codes
// (vid-a2 also takes reference videos and audios), vid-b serves vidB-H3 with reference images only;
// a chat channel expands spec-mode templates. Video channels send the tier code as the model.
func videoUpstreams(t *testing.T) (*fakeupstream.Server, envOption) {
	t.Helper()
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	ch := func(name string, media upstream.Media, tiers []string, caps ...upstream.Capability) upstream.Config {
		return upstream.Config{Name: name, Provider: "prov-" + name, Media: media, Family: "fam-" + name, Protocol: upstream.ProtocolOpenAI,
			BaseURL: fake.ChannelURL(name), APIKey: "test", Capabilities: caps, Tiers: tiers,
			SoftTimeout: 2 * time.Second, CostUSD: 0.05, Rating: 0.5}
	}
	tierA := []string{upstream.TierA20Pro, upstream.TierA20Fast, upstream.TierA20Mini, upstream.TierA25Pro}
	cfgs := []upstream.Config{
		ch("vid-a", upstream.MediaVideo, tierA, upstream.CapImages, upstream.CapGenerateAudio),
		ch("vid-a2", upstream.MediaVideo, tierA, upstream.CapImages, upstream.CapVideos, upstream.CapAudios, upstream.CapGenerateAudio),
		ch("vid-b", upstream.MediaVideo, []string{upstream.TierBH3}, upstream.CapImages),
		ch("chat-a", upstream.MediaChat, nil),
	}
	return fake, func(c *envConfig) { c.opts.Upstreams = cfgs }
}

// waitVideo polls GET /api/videos?id= until the task has one of the statuses.
func (e *env) waitVideo(key, id string, statuses ...models.VideoStatus) *resp {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := e.call("GET", "/api/videos?id="+id, key, nil).expect(e.t, 200)
		for _, s := range statuses {
			if r.str("status") == string(s) {
				return r
			}
		}
		time.Sleep(30 * time.Millisecond)
	}
	e.t.Fatalf("video task %s did not reach %v in time", id, statuses)
	return nil
}

// credits returns the caller's balance of GET /api/balance.
func (e *env) credits(key string) float64 {
	e.t.Helper()
	return e.call("GET", "/api/balance", key, nil).expect(e.t, 200).num("credits")
}

// videoLeaks fails the test when a response names a channel, provider or prompt.
func videoLeaks(t *testing.T, body []byte, extra ...string) {
	t.Helper()
	for _, leak := range append([]string{"vid-a", "vid-b", "prov-", "fam-", "chat-a", "video_1"}, extra...) {
		if bytes.Contains(body, []byte(leak)) {
			t.Fatalf("response leaks %q: %s", leak, body)
		}
	}
}

func TestVideoTierDurationTable(t *testing.T) {
	_, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10000)
	tiers := []struct {
		code     string
		min, max int
	}{
		{"vidA-2-0-pro-260801", 4, 15}, {"vidA-2-0-fast-260801", 4, 15}, {"vidA-2-0-mini-260801", 4, 15},
		{"vidA-2-5-pro-260801", 4, 30}, {"vidB-H3", 4, 15},
	}
	for _, tier := range tiers {
		for _, d := range []int{3, 4, 15, 16, 30, 31} {
			t.Run(fmt.Sprintf("%s/%ds", tier.code, d), func(t *testing.T) {
				before := e.credits(key)
				r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "a fox", "model": tier.code, "duration": d})
				if d < tier.min || d > tier.max {
					want := fmt.Sprintf("%d–%d s for tier %s", tier.min, tier.max, tier.code)
					if r.Status != 400 || !strings.Contains(r.str("error"), want) {
						t.Fatalf("got %d %s, want 400 naming %q", r.Status, r.Body, want)
					}
					if after := e.credits(key); after != before {
						t.Fatalf("credits %v -> %v on a refused submit", before, after)
					}
					return
				}
				r.expect(t, 200)
				if r.str("model") != tier.code || r.num("duration") != float64(d) || r.str("status") != "pending" || r.JSON["ok"] != true {
					t.Fatalf("submit = %s", r.Body)
				}
				if after := e.credits(key); before-after != r.num("credits") {
					t.Fatalf("credits %v -> %v, want %v charged", before, after, r.num("credits"))
				}
			})
		}
	}
}

func TestVideoTierSelection(t *testing.T) {
	_, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10000)
	cases := []struct {
		name       string
		body       map[string]any
		status     int
		model      string
		resolution string
		msg        string
	}{
		{"auto 480p by default", map[string]any{"duration": 10}, 200, "vidA-2-0-pro-260801", "480p", ""},
		{"explicit auto", map[string]any{"model": "auto", "duration": 10}, 200, "vidA-2-0-pro-260801", "480p", ""},
		{"auto 720p", map[string]any{"resolution": "720p", "duration": 10}, 200, "vidA-2-0-fast-260801", "720p", ""},
		{"auto 1080p", map[string]any{"resolution": "1080p", "duration": 10}, 200, "vidA-2-5-pro-260801", "1080p", ""},
		{"auto past 15 s", map[string]any{"duration": 20}, 200, "vidA-2-5-pro-260801", "720p", ""},
		{"auto 768P", map[string]any{"resolution": "768P", "duration": 5}, 200, "vidB-H3", "768P", ""},
		{"auto 2K any case", map[string]any{"resolution": "2k", "duration": 5}, 200, "vidB-H3", "2K", ""},
		{"locked tier default resolution", map[string]any{"model": "vidA-2-5-pro-260801", "duration": 5}, 200, "vidA-2-5-pro-260801", "720p", ""},
		{"auto 480p past 15 s", map[string]any{"resolution": "480p", "duration": 16}, 400, "", "", "no video tier offers 16 s at 480p"},
		{"auto past 30 s", map[string]any{"duration": 31}, 400, "", "", "no video tier offers 31 s"},
		{"locked tier without 720p", map[string]any{"model": "vidA-2-0-pro-260801", "resolution": "720p", "duration": 5}, 400, "", "", "not offered by tier vidA-2-0-pro-260801"},
		{"locked tier B without 1080p", map[string]any{"model": "vidB-H3", "resolution": "1080p", "duration": 5}, 400, "", "", "not offered by tier vidB-H3"},
		{"unknown tier", map[string]any{"model": "vidC-9", "duration": 5}, 400, "", "", "unknown video model"},
		{"unknown resolution", map[string]any{"resolution": "4k", "duration": 5}, 400, "", "", "resolution"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.body["prompt"] = "a fox"
			r := e.call("POST", "/api/videos", key, c.body)
			if r.Status != c.status {
				t.Fatalf("got %d %s, want %d", r.Status, r.Body, c.status)
			}
			if c.status != 200 {
				if !strings.Contains(r.str("error"), c.msg) {
					t.Fatalf("error %q does not contain %q", r.str("error"), c.msg)
				}
				return
			}
			if r.str("model") != c.model || r.str("resolution") != c.resolution {
				t.Fatalf("got %s %s, want %s %s", r.str("model"), r.str("resolution"), c.model, c.resolution)
			}
		})
	}
}

func TestVideoCostsPerSecond(t *testing.T) {
	_, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	cases := []struct {
		resolution string
		duration   float64
		seconds    float64
		credits    float64
	}{
		{"480p", 5, 5, 5}, {"720p", 5, 5, 10}, {"768P", 5, 5, 10}, {"1080p", 5, 5, 15}, {"2K", 5, 5, 15},
		{"720p", 4.5, 5, 10}, {"480p", 14.01, 15, 15},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%gs", c.resolution, c.duration), func(t *testing.T) {
			before := e.credits(key)
			r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "a fox", "resolution": c.resolution, "duration": c.duration}).expect(t, 200)
			if r.num("credits") != c.credits || r.num("duration") != c.seconds || r.str("resolution") != c.resolution {
				t.Fatalf("submit = %s, want %v credits for %v s", r.Body, c.credits, c.seconds)
			}
			if after := e.credits(key); before-after != c.credits {
				t.Fatalf("balance %v -> %v, want %v charged", before, after, c.credits)
			}
		})
	}
	t.Run("3.5 s is below every range even rounded up", func(t *testing.T) {
		r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "a fox", "duration": 3.5}).expect(t, 400)
		if !strings.Contains(r.str("error"), "3.5 s is outside 4–15 s") {
			t.Fatalf("error = %s", r.Body)
		}
	})
	t.Run("insufficient credits", func(t *testing.T) {
		_, poor := e.tenant("Poor", 3)
		r := e.call("POST", "/api/videos", poor, map[string]any{"prompt": "a fox", "duration": 4}).expect(t, 402)
		if r.str("error") != "insufficient credits: need 4, have 3, missing 1" {
			t.Fatalf("error = %s", r.Body)
		}
		if e.credits(poor) != 3 {
			t.Fatalf("credits changed by a refused submit")
		}
	})
}

func TestVideoRunsToDoneWithAStoredMP4(t *testing.T) {
	srv, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	srv.SetVideoPolls(3)
	r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "a red fox at dawn", "model": "vidB-H3", "resolution": "2K",
		"duration": 6, "ratio": "9:16", "images": []string{"https://cdn.example.com/first.png"}}).expect(t, 200)
	videoLeaks(t, r.Body)
	if r.num("credits") != 18 || e.credits(key) != 82 {
		t.Fatalf("submit = %s, balance %v; want 18 credits charged", r.Body, e.credits(key))
	}
	done := e.waitVideo(key, r.str("id"), "done", "failed")
	if done.str("status") != "done" || done.num("progress") != 100 || done.JSON["error"] != nil ||
		!strings.HasPrefix(done.str("video_url"), e.app.Config.CDNURL+"/videos/") || !strings.HasSuffix(done.str("video_url"), "/"+r.str("id")+".mp4") {
		t.Fatalf("task = %s", done.Body)
	}
	videoLeaks(t, done.Body, "a red fox")
	res, err := http.Get(done.str("video_url"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "video/mp4" || !bytes.Equal(body, fakeupstream.MP4) {
		t.Fatalf("video = %d %s (%d bytes)", res.StatusCode, res.Header.Get("Content-Type"), len(body))
	}
	sent := srv.LastRequest("/v1/videos")
	var upstreamBody map[string]any
	_ = json.Unmarshal(sent.Body, &upstreamBody)
	if sent.Channel != "vid-b" || upstreamBody["model"] != "vidB-H3" || upstreamBody["seconds"] != "6" || upstreamBody["prompt"] != "a red fox at dawn" {
		t.Fatalf("upstream got %s on channel %s", sent.Body, sent.Channel)
	}
	if e.credits(key) != 82 {
		t.Fatalf("balance after done = %v, want 82 (charged once)", e.credits(key))
	}
	list := e.call("GET", "/api/videos?filter.status=done", key, nil).expect(t, 200)
	if list.num("total") != 1 || len(list.JSON["items"].([]any)) != 1 {
		t.Fatalf("done list = %s", list.Body)
	}
	videoLeaks(t, list.Body, "a red fox")
	if e.call("DELETE", "/api/videos?id="+r.str("id"), key, nil).expect(t, 409); e.credits(key) != 82 {
		t.Fatalf("cancelling a done task changed the balance")
	}
}

func TestVideoUpstreamFailureRefundsOnce(t *testing.T) {
	srv, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 50)
	for _, ch := range videoChannels {
		srv.SetChannelFault(ch, fakeupstream.Fault{Mode: fakeupstream.ServerError})
	}
	r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "x", "resolution": "1080p", "duration": 10}).expect(t, 200)
	if e.credits(key) != 20 {
		t.Fatalf("balance after submit = %v, want 20", e.credits(key))
	}
	failed := e.waitVideo(key, r.str("id"), "failed", "done")
	if failed.str("status") != "failed" || failed.str("error") == "" || failed.str("video_url") != "" {
		t.Fatalf("task = %s", failed.Body)
	}
	videoLeaks(t, failed.Body)
	if e.credits(key) != 50 {
		t.Fatalf("balance after failure = %v, want 50 (refunded in full)", e.credits(key))
	}
	// A second failure report changes nothing: refunded once.
	if again, err := e.app.Videos().FailVideoTask(t.Context(), r.str("id"), "again"); err != nil || again {
		t.Fatalf("second failure = %v, %v; want false, nil", again, err)
	}
	if e.credits(key) != 50 {
		t.Fatalf("balance after a repeated failure = %v, want 50", e.credits(key))
	}
	e.call("DELETE", "/api/videos?id="+r.str("id"), key, nil).expect(t, 409)
}

func TestVideoDeadlineFailsAndRefunds(t *testing.T) {
	srv, fake := videoUpstreams(t)
	e := newEnv(t, fake, withVar("SERVICE_JOB_DEADLINE", "2s"))
	_, key := e.tenant("Acme", 10)
	srv.SetVideoPolls(100000)
	r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "x", "duration": 4}).expect(t, 200)
	failed := e.waitVideo(key, r.str("id"), "failed", "done")
	if failed.str("status") != "failed" || !strings.Contains(failed.str("error"), "timed out") {
		t.Fatalf("task = %s", failed.Body)
	}
	if e.credits(key) != 10 {
		t.Fatalf("balance = %v, want 10 (refunded)", e.credits(key))
	}
}

func TestVideoCancelRefundsAndCancelsUpstream(t *testing.T) {
	srv, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	_, otherKey := e.tenant("Other", 100)
	srv.SetVideoPolls(100000)
	r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "x", "resolution": "720p", "duration": 8}).expect(t, 200)
	if e.credits(key) != 84 {
		t.Fatalf("balance after submit = %v, want 84", e.credits(key))
	}
	running := e.waitVideo(key, r.str("id"), "running")
	videoLeaks(t, running.Body)

	e.call("GET", "/api/videos?id="+r.str("id"), otherKey, nil).expect(t, 404)
	e.call("DELETE", "/api/videos?id="+r.str("id"), otherKey, nil).expect(t, 404)
	e.call("DELETE", "/api/videos?id="+r.str("id"), e.adminKey, nil).expect(t, 403)
	e.call("DELETE", "/api/videos", key, nil).expect(t, 400)

	c := e.call("DELETE", "/api/videos?id="+r.str("id"), key, nil).expect(t, 200)
	if c.str("status") != "cancelled" || c.JSON["ok"] != true {
		t.Fatalf("cancel = %s", c.Body)
	}
	videoLeaks(t, c.Body)
	if e.credits(key) != 100 {
		t.Fatalf("balance after cancel = %v, want 100 (refunded)", e.credits(key))
	}
	var task models.VideoTask
	if err := e.app.DB.Gorm.First(&task, "id = ?", r.str("id")).Error; err != nil || task.UpstreamTaskID == "" {
		t.Fatalf("stored task: %v %+v", err, task)
	}
	// The fake upstream forgets a video on DELETE: asking for it again is 404.
	res, err := http.Get(srv.ChannelURL(task.Upstream) + "/videos/" + task.UpstreamTaskID)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Fatalf("the upstream still has the task (%d): no DELETE reached it", res.StatusCode)
	}

	again := e.call("DELETE", "/api/videos?id="+r.str("id"), key, nil).expect(t, 409)
	if !strings.Contains(again.str("error"), "already ended (cancelled)") {
		t.Fatalf("second cancel = %s", again.Body)
	}
	if e.credits(key) != 100 {
		t.Fatalf("balance after a second cancel = %v, want 100 (refunded once)", e.credits(key))
	}
	time.Sleep(300 * time.Millisecond) // the poll already queued finds the task cancelled and stops
	if got := e.call("GET", "/api/videos?id="+r.str("id"), key, nil).expect(t, 200); got.str("status") != "cancelled" {
		t.Fatalf("task after cancel = %s", got.Body)
	}
}

func TestVideoListPagingFilterAndVisibility(t *testing.T) {
	srv, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 1000)
	_, otherKey := e.tenant("Other", 1000)
	_, memberKey := e.member(key, map[string]any{})
	_, login := e.personalLogin("me@example.com", 100)
	bearer := map[string]string{"Authorization": "Bearer " + login}
	srv.SetVideoPolls(100000)
	var ids []string
	for range 5 {
		ids = append(ids, e.call("POST", "/api/videos", key, map[string]any{"prompt": "x", "duration": 4}).expect(t, 200).str("id"))
	}
	mine := e.call("POST", "/api/videos", memberKey, map[string]any{"prompt": "x", "duration": 4}).expect(t, 200).str("id")
	personal := e.callH("POST", "/api/videos", bearer, map[string]any{"prompt": "x", "duration": 4}).expect(t, 200).str("id")
	e.call("POST", "/api/videos", otherKey, map[string]any{"prompt": "x", "duration": 4}).expect(t, 200)
	for _, id := range ids[:2] {
		e.call("DELETE", "/api/videos?id="+id, key, nil).expect(t, 200)
	}

	seen := map[string]bool{}
	for page := 1; page <= 4; page++ {
		r := e.call("GET", fmt.Sprintf("/api/videos?page_num=%d&page_size=2", page), key, nil).expect(t, 200)
		items := r.JSON["items"].([]any)
		if r.num("total") != 6 || r.num("page_num") != float64(page) || r.num("page_size") != 2 {
			t.Fatalf("page %d = %s", page, r.Body)
		}
		if want := min(2, max(0, 6-2*(page-1))); len(items) != want {
			t.Fatalf("page %d has %d items, want %d", page, len(items), want)
		}
		for _, it := range items {
			seen[it.(map[string]any)["id"].(string)] = true
		}
	}
	if len(seen) != 6 || !seen[mine] || seen[personal] {
		t.Fatalf("the tenant's pages saw %d tasks (member's %v, personal %v), want its 6", len(seen), seen[mine], seen[personal])
	}
	if r := e.call("GET", "/api/videos", key, nil).expect(t, 200); r.num("page_num") != 1 || r.num("page_size") != 20 || len(r.JSON["items"].([]any)) != 6 {
		t.Fatalf("default page = %s", r.Body)
	}
	if r := e.call("GET", "/api/videos?page_size=500", key, nil).expect(t, 200); r.num("page_size") != 100 {
		t.Fatalf("page_size 500 = %v, want cut to 100", r.num("page_size"))
	}
	cancelled := e.call("GET", "/api/videos?filter.status=cancelled", key, nil).expect(t, 200)
	if cancelled.num("total") != 2 {
		t.Fatalf("cancelled = %s", cancelled.Body)
	}
	for _, it := range cancelled.JSON["items"].([]any) {
		if it.(map[string]any)["status"] != "cancelled" {
			t.Fatalf("filter.status=cancelled returned %v", it)
		}
	}
	if r := e.call("GET", "/api/videos?filter.status=pending", otherKey, nil).expect(t, 200); r.num("total") > 1 {
		t.Fatalf("other tenant sees %v tasks", r.num("total"))
	}
	if r := e.call("GET", "/api/videos", memberKey, nil).expect(t, 200); r.num("total") != 1 {
		t.Fatalf("member sees %v tasks, want its own 1", r.num("total"))
	}
	if r := e.callH("GET", "/api/videos", bearer, nil).expect(t, 200); r.num("total") != 1 {
		t.Fatalf("personal login sees %v tasks, want its own 1", r.num("total"))
	}
	e.call("GET", "/api/videos?id="+ids[2], memberKey, nil).expect(t, 404)
	e.call("GET", "/api/videos?id="+mine, key, nil).expect(t, 200)
	e.callH("GET", "/api/videos?id="+ids[2], bearer, nil).expect(t, 404)
	for _, q := range []string{"filter.status=weird", "page_num=0", "page_num=x", "page_size=0", "page_size=abc"} {
		e.call("GET", "/api/videos?"+q, key, nil).expect(t, 400)
	}
	e.call("GET", "/api/videos", e.adminKey, nil).expect(t, 403)
}

func TestVideoSubmitValidationChangesNothing(t *testing.T) {
	_, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	ten := make([]string, 10)
	for i := range ten {
		ten[i] = fmt.Sprintf("https://cdn.example.com/%d.png", i)
	}
	cases := []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"malformed JSON", `{"prompt":`, 400, "invalid JSON"},
		{"nothing to generate", map[string]any{"duration": 5}, 400, "exactly one of"},
		{"prompt and template", map[string]any{"prompt": "x", "template_id": "t", "duration": 5}, 400, "exactly one of"},
		{"empty prompt", map[string]any{"prompt": " ", "duration": 5}, 400, "prompt"},
		{"input with prompt", map[string]any{"prompt": "x", "input": map[string]any{"a": 1}, "duration": 5}, 400, "input"},
		{"no duration", map[string]any{"prompt": "x"}, 400, "duration is required"},
		{"duration as text", map[string]any{"prompt": "x", "duration": "5"}, 400, "duration"},
		{"zero duration", map[string]any{"prompt": "x", "duration": 0}, 400, "duration"},
		{"bad ratio", map[string]any{"prompt": "x", "duration": 5, "ratio": "wide"}, 400, "ratio"},
		{"ten images", map[string]any{"prompt": "x", "duration": 5, "images": ten}, 400, "at most 9"},
		{"bad image URL", map[string]any{"prompt": "x", "duration": 5, "images": []string{"ftp://x/y.png"}}, 400, "images[0]"},
		{"videos without a capable upstream", map[string]any{"prompt": "x", "model": "vidB-H3", "duration": 5, "videos": []string{"https://cdn.example.com/v.mp4"}}, 400, models.NoUpstreamMessage},
		{"audios without a capable upstream", map[string]any{"prompt": "x", "model": "vidB-H3", "duration": 5, "audios": []string{"https://cdn.example.com/a.mp3"}}, 400, models.NoUpstreamMessage},
		{"generate_audio without a capable upstream", map[string]any{"prompt": "x", "resolution": "2K", "duration": 5, "generate_audio": true}, 400, models.NoUpstreamMessage},
		{"unknown template", map[string]any{"template_id": models.NewID(), "duration": 5}, 404, "template"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/videos", key, c.body)
			if r.Status != c.status || !strings.Contains(r.str("error"), c.msg) {
				t.Fatalf("got %d %s, want %d containing %q", r.Status, r.Body, c.status, c.msg)
			}
		})
	}
	e.call("POST", "/api/videos", e.adminKey, map[string]any{"prompt": "x", "duration": 5}).expect(t, 403)
	if e.credits(key) != 100 {
		t.Fatalf("credits = %v after refused submits, want 100", e.credits(key))
	}
	var n int64
	e.app.DB.Gorm.Model(&models.VideoTask{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d video tasks stored by refused submits", n)
	}
	// Capabilities that an upstream has are accepted: vid-a2 takes reference videos.
	ok := e.call("POST", "/api/videos", key, map[string]any{"prompt": "x", "duration": 5, "images": ten[:9],
		"videos": []string{"https://cdn.example.com/v.mp4"}, "audios": []string{"https://cdn.example.com/a.mp3"}, "generate_audio": true}).expect(t, 200)
	if ok.str("model") != "vidA-2-0-pro-260801" {
		t.Fatalf("submit = %s", ok.Body)
	}
}

func TestVideoFromTemplates(t *testing.T) {
	srv, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	form := e.tplCreate("/api/video-templates", key, tplVideo("promo-clip", map[string]any{"model": "vidA-2-5-pro-260801",
		"resolution": "1080p", "duration": 20, "ratio": "9:16", "prompt_template": "A clip about {title}",
		"fields": []any{map[string]any{"key": "title", "label": "标题"}}}))
	e.tplCreate("/api/video-templates", key, tplVideo("spec-clip", map[string]any{"skill_spec_md": "# Clip\nMake a short product clip."}))

	t.Run("form template by id with its tier, length and resolution", func(t *testing.T) {
		r := e.call("POST", "/api/videos", key, map[string]any{"template_id": form, "input": map[string]any{"title": "tea"}}).expect(t, 200)
		if r.str("model") != "vidA-2-5-pro-260801" || r.str("resolution") != "1080p" || r.num("duration") != 20 || r.num("credits") != 60 {
			t.Fatalf("submit = %s", r.Body)
		}
		e.waitVideo(key, r.str("id"), "done")
		var body map[string]any
		_ = json.Unmarshal(srv.LastRequest("/v1/videos").Body, &body)
		if body["prompt"] != "A clip about tea" || body["model"] != "vidA-2-5-pro-260801" {
			t.Fatalf("upstream got %v", body)
		}
	})
	t.Run("the caller's duration wins and must fit the template's tier", func(t *testing.T) {
		e.call("POST", "/api/videos", key, map[string]any{"template_id": "promo-clip", "input": map[string]any{"title": "tea"}, "duration": 31}).expect(t, 400)
		r := e.call("POST", "/api/videos", key, map[string]any{"template_id": "promo-clip", "input": map[string]any{"title": "tea"}, "duration": 4}).expect(t, 200)
		if r.num("credits") != 12 {
			t.Fatalf("submit = %s", r.Body)
		}
		e.waitVideo(key, r.str("id"), "done")
	})
	t.Run("missing field", func(t *testing.T) {
		e.call("POST", "/api/videos", key, map[string]any{"template_id": form, "input": map[string]any{}}).expect(t, 400)
	})
	t.Run("spec template expanded by chat", func(t *testing.T) {
		e.call("POST", "/api/videos", key, map[string]any{"template_id": "spec-clip", "duration": 5}).expect(t, 400)
		r := e.call("POST", "/api/videos", key, map[string]any{"template_id": "spec-clip", "input": "green tea in the rain", "duration": 5}).expect(t, 200)
		e.waitVideo(key, r.str("id"), "done")
		var body map[string]any
		_ = json.Unmarshal(srv.LastRequest("/v1/videos").Body, &body)
		if body["prompt"] != "fake reply" {
			t.Fatalf("upstream got %v, want the expanded prompt", body)
		}
		if !strings.Contains(string(srv.LastRequest("/v1/chat/completions").Body), "green tea in the rain") {
			t.Fatalf("the chat expansion did not get the caller's sentence")
		}
	})
}

func TestVideoSubmitRateLimit(t *testing.T) {
	_, fake := videoUpstreams(t)
	e := newEnv(t, fake, withVar("SERVICE_GENERATE_RATE", "2"))
	_, key := e.tenant("Acme", 100)
	for range 2 {
		e.call("POST", "/api/videos", key, map[string]any{"prompt": "x", "duration": 4}).expect(t, 200)
	}
	r := e.call("POST", "/api/videos", key, map[string]any{"prompt": "x", "duration": 4}).expect(t, 429)
	if r.Header.Get("Retry-After") == "" || e.credits(key) != 92 {
		t.Fatalf("third submit = %s (Retry-After %q), balance %v; want 429 with nothing charged", r.Body, r.Header.Get("Retry-After"), e.credits(key))
	}
}

func TestVideoSubmitIdempotencyKey(t *testing.T) {
	_, fake := videoUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	h := map[string]string{"X-API-Key": key, "Idempotency-Key": "retry-1"}
	body := map[string]any{"prompt": "x", "duration": 4}
	first := e.callH("POST", "/api/videos", h, body).expect(t, 200)
	again := e.callH("POST", "/api/videos", h, body).expect(t, 200)
	if again.str("id") != first.str("id") || again.Header.Get("Idempotent-Replayed") != "true" || e.credits(key) != 96 {
		t.Fatalf("retry = %s (replayed %q), balance %v; want the first answer, charged once", again.Body, again.Header.Get("Idempotent-Replayed"), e.credits(key))
	}
}

func TestVideoProgressIsRealFromTheStart(t *testing.T) {
	t.Run("an upstream that finishes at once does not show 99 while the task runs", func(t *testing.T) {
		e := newEnv(t, func(c *envConfig) { c.opts.Jobs.VideoPoll = 2 * time.Second }) // the built-in upstreams
		_, key := e.tenant("Acme", 100)
		id := e.call("POST", "/api/videos", key, map[string]any{"prompt": "a boat", "model": upstream.TierA20Fast, "duration": 5}).expect(t, 200).str("id")
		r := e.waitVideo(key, id, "running", "done")
		if r.str("status") != "running" || r.num("progress") > 5 {
			t.Fatalf("just started: status %s progress %v, want running near 0", r.str("status"), r.num("progress"))
		}
		if r = e.waitVideo(key, id, "done", "failed"); r.str("status") != "done" || r.num("progress") != 100 {
			t.Fatalf("finished: %s", r.Body)
		}
	})
	t.Run("without an upstream figure, progress is the time elapsed against the tier's expected time", func(t *testing.T) {
		srv, opt := videoUpstreams(t)
		srv.SetVideoPolls(100000)
		srv.SetVideoProgressReported(false)
		e := newEnv(t, opt)
		var offset atomic.Int64
		e.app.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		_, key := e.tenant("Acme", 100)
		id := e.call("POST", "/api/videos", key, map[string]any{"prompt": "a boat", "model": upstream.TierA20Fast, "duration": 5}).expect(t, 200).str("id")
		if r := e.waitVideo(key, id, "running"); r.num("progress") > 5 {
			t.Fatalf("just started: progress %v, want near 0", r.num("progress"))
		}
		expected := contract.ExpectedVideoTime(upstream.TierA20Fast, 5)
		waitProgress := func(lo, hi float64) {
			t.Helper()
			var last float64
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				r := e.call("GET", "/api/videos?id="+id, key, nil).expect(t, 200)
				if last = r.num("progress"); last >= lo && last <= hi && r.str("status") == "running" {
					return
				}
			}
			t.Fatalf("progress = %v, want %v..%v", last, lo, hi)
		}
		offset.Store(int64(expected / 2))
		waitProgress(45, 55)
		offset.Store(int64(expected * 3))
		waitProgress(95, 95) // an estimate stops short of done
		offset.Store(0)      // progress never goes back
		time.Sleep(300 * time.Millisecond)
		waitProgress(95, 95)
	})
	t.Run("an upstream's own figure is shown", func(t *testing.T) {
		srv, opt := videoUpstreams(t)
		srv.SetVideoPolls(4) // 25, 50, 75, then completed
		e := newEnv(t, func(c *envConfig) { opt(c); c.opts.Jobs.VideoPoll = 400 * time.Millisecond })
		_, key := e.tenant("Acme", 100)
		id := e.call("POST", "/api/videos", key, map[string]any{"prompt": "a boat", "model": upstream.TierA20Fast, "duration": 5}).expect(t, 200).str("id")
		seen := map[float64]bool{}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(40 * time.Millisecond) {
			r := e.call("GET", "/api/videos?id="+id, key, nil).expect(t, 200)
			seen[r.num("progress")] = true
			if r.str("status") == "done" {
				break
			}
		}
		if !seen[25] || !seen[50] || !seen[75] || !seen[100] {
			t.Fatalf("progress values seen = %v, want the upstream's 25, 50, 75 and then 100", seen)
		}
	})
}
