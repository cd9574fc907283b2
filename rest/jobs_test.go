package rest_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"studio/jobs"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

// fakeUpstreams starts the fake OpenAI-compatible server and configures image channels on it:
// img-a and img-b in family gen2 (img-a also transparent), img-c alone in family gen3, and a chat channel.
func fakeUpstreams(t *testing.T) (*fakeupstream.Server, envOption) {
	t.Helper()
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	ch := func(name, family string, media upstream.Media, caps ...upstream.Capability) upstream.Config {
		return upstream.Config{Name: name, Provider: "prov-" + name, Media: media, Family: family, Protocol: upstream.ProtocolOpenAI,
			BaseURL: fake.ChannelURL(name), APIKey: "test", Model: "model-" + name, Capabilities: caps,
			SoftTimeout: 2 * time.Second, CostUSD: 0.04, Rating: 0.5}
	}
	cfgs := []upstream.Config{
		ch("img-a", "gen2", upstream.MediaImage, upstream.CapReferenceImages, upstream.CapQuality, upstream.CapTransparent, upstream.CapLarge),
		ch("img-b", "gen2", upstream.MediaImage, upstream.CapReferenceImages, upstream.CapQuality),
		ch("img-c", "gen3", upstream.MediaImage, upstream.CapQuality),
		ch("chat-a", "chat", upstream.MediaChat, upstream.CapVision),
	}
	return fake, func(c *envConfig) { c.opts.Upstreams = cfgs }
}

// waitJob polls GET /api/jobs?id= until the job ends.
func (e *env) waitJob(key, id string) *resp {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := e.call("GET", "/api/jobs?id="+id, key, nil).expect(e.t, 200)
		if s := r.str("status"); s == "done" || s == "failed" {
			return r
		}
		time.Sleep(30 * time.Millisecond)
	}
	e.t.Fatalf("job %s did not end in time", id)
	return nil
}

func TestGenerateRunsToDoneAndServesTheImage(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "a red fox", "ratio": "3:4"}).expect(t, 200)
	if r.JSON["ok"] != true || r.str("status") != "pending" || r.str("jobId") == "" {
		t.Fatalf("submit = %s", r.Body)
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 9 {
		t.Fatalf("credits after submit = %v, want 9 (charged at submit)", b.num("credits"))
	}
	done := e.waitJob(key, r.str("jobId"))
	if done.str("status") != "done" || !strings.HasPrefix(done.str("cdn_url"), e.app.Config.CDNURL+"/") || done.JSON["error"] != nil {
		t.Fatalf("job = %s", done.Body)
	}
	res, err := http.Get(done.str("cdn_url"))
	if err != nil {
		t.Fatal(err)
	}
	img, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "image/") || len(img) < 100 {
		t.Fatalf("result = %d %s (%d bytes)", res.StatusCode, res.Header.Get("Content-Type"), len(img))
	}
	for _, leak := range []string{"img-a", "img-b", "prov-", "model-img", "a red fox"} {
		if strings.Contains(string(done.Body), leak) {
			t.Fatalf("job view leaks %q: %s", leak, done.Body)
		}
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 9 {
		t.Fatalf("credits after done = %v, want 9 (charged once)", b.num("credits"))
	}
}

func TestGenerateValidationChangesNothing(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 5)
	cases := []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"malformed JSON", `{"prompt":`, 400, "invalid JSON"},
		{"nothing to generate", map[string]any{"ratio": "1:1"}, 400, "exactly one of"},
		{"prompt and template", map[string]any{"prompt": "x", "template_id": models.NewID()}, 400, "exactly one of"},
		{"empty prompt", map[string]any{"prompt": "  "}, 400, "prompt"},
		{"mask without image_url", map[string]any{"prompt": "x", "mask": "https://example.com/m.png"}, 400, "together"},
		{"image_url without mask", map[string]any{"prompt": "x", "image_url": "https://example.com/i.png"}, 400, "together"},
		{"inpainting has no upstream", map[string]any{"prompt": "x", "image_url": "https://example.com/i.png", "mask": "https://example.com/m.png"}, 400, models.NoUpstreamMessage},
		{"transparent in a family without it", map[string]any{"prompt": "x", "background": "transparent", "model": "gen3"}, 400, models.NoUpstreamMessage},
		{"bad quality", map[string]any{"prompt": "x", "quality": "ultra"}, 400, "quality"},
		{"bad background", map[string]any{"prompt": "x", "background": "green"}, 400, "background"},
		{"bad ratio", map[string]any{"prompt": "x", "ratio": "wide"}, 400, "ratio"},
		{"bad resolution", map[string]any{"prompt": "x", "resolution": "8k"}, 400, "resolution"},
		{"unknown model", map[string]any{"prompt": "x", "model": "gen9"}, 400, "unknown model"},
		{"bad reference", map[string]any{"prompt": "x", "reference_images": []string{"ftp://x/y.png"}}, 400, "reference_images[0]"},
		{"bad callback", map[string]any{"prompt": "x", "callback_url": "not a url"}, 400, "callback_url"},
		{"unknown template", map[string]any{"template_id": models.NewID(), "input": map[string]any{}}, 404, "template"},
		{"insufficient credits", map[string]any{"prompt": "x", "resolution": "4k", "n": 1, "model": "img-a"}, 0, ""},
	}
	for _, c := range cases {
		if c.status == 0 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/generate", key, c.body)
			if r.Status != c.status || !strings.Contains(r.str("error"), c.msg) {
				t.Fatalf("got %d %s, want %d containing %q", r.Status, r.Body, c.status, c.msg)
			}
		})
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 5 {
		t.Fatalf("credits = %v after rejected submits, want 5", b.num("credits"))
	}
	var n int64
	e.app.DB.Gorm.Model(&models.Job{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d jobs stored by rejected submits", n)
	}
}

func TestInsufficientCreditsIs402WithTheMissingAmount(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 1)
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "resolution": "2k", "model": "img-a"}).expect(t, 402)
	if r.str("error") != "insufficient credits: need 2, have 1, missing 1" {
		t.Fatalf("error = %q", r.str("error"))
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 1 {
		t.Fatalf("credits = %v, want 1", b.num("credits"))
	}
}

// callbackReceiver records callbacks; status decides its answer.
type callbackReceiver struct {
	mu     sync.Mutex
	got    []receivedCallback
	status []int // answers in order; 200 after the list
	srv    *httptest.Server
}

type receivedCallback struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *callbackReceiver {
	c := &callbackReceiver{status: statuses}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.got = append(c.got, receivedCallback{r.Header.Clone(), b})
		code := 200
		if len(c.status) > 0 {
			code, c.status = c.status[0], c.status[1:]
		}
		c.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *callbackReceiver) wait(t *testing.T, n int) []receivedCallback {
	t.Helper()
	for i := 0; i < 400; i++ {
		c.mu.Lock()
		if len(c.got) >= n {
			out := append([]receivedCallback(nil), c.got...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("callback %d never arrived", n)
	return nil
}

func TestCallbackIsSignedWithExactFieldsAndRetried(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	tid, key := e.tenant("Acme", 10)
	recv := newReceiver(t, 500, 503)
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "a cat", "callback_url": recv.srv.URL + "/hook"}).expect(t, 200)
	jobID := r.str("jobId")
	got := recv.wait(t, 3) // two failures, then delivered
	last := got[2]
	var body map[string]any
	if err := json.Unmarshal(last.body, &body); err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for k := range body {
		keys = append(keys, k)
	}
	want := map[string]bool{"job_id": true, "status": true, "cdn_url": true, "error": true, "elapsed_ms": true, "cost_usd": true}
	if len(body) != len(want) {
		t.Fatalf("callback fields = %v, want exactly job_id, status, cdn_url, error, elapsed_ms, cost_usd", keys)
	}
	for k := range body {
		if !want[k] {
			t.Fatalf("unexpected callback field %q", k)
		}
	}
	if body["job_id"] != jobID || body["status"] != "done" || body["error"] != nil || body["cost_usd"].(float64) != 0.04 {
		t.Fatalf("callback body = %s", last.body)
	}
	tenant, _ := e.app.Accounts().TenantSettings(t.Context(), modelstest.Tenant(tid))
	var ts int64
	fmt.Sscan(last.header.Get("webhook-timestamp"), &ts)
	wantSig := jobs.SignCallback(models.CallbackSecretKey(tenant.CallbackSecret), last.header.Get("webhook-id"), ts, last.body)
	if last.header.Get("webhook-id") != jobID || last.header.Get("webhook-signature") != wantSig {
		t.Fatalf("signature %q, want %q", last.header.Get("webhook-signature"), wantSig)
	}
	time.Sleep(100 * time.Millisecond)
	j, _ := e.app.Jobs().Job(t.Context(), jobID)
	if j.Callback != "delivered" {
		t.Fatalf("callback state = %q, want delivered", j.Callback)
	}
}

func TestLostCallbackIsRecoveredByPolling(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)
	recv := newReceiver(t, 500, 500, 500, 500, 500, 500)
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "a cat", "callback_url": recv.srv.URL}).expect(t, 200)
	done := e.waitJob(key, r.str("jobId"))
	if done.str("status") != "done" || done.str("cdn_url") == "" {
		t.Fatalf("polling = %s", done.Body)
	}
	recv.wait(t, 4) // 1 + 3 retries, all refused
	time.Sleep(200 * time.Millisecond)
	j, _ := e.app.Jobs().Job(t.Context(), r.str("jobId"))
	if j.Callback != "failed" {
		t.Fatalf("callback state = %q after every retry failed, want failed", j.Callback)
	}
}

func TestFallbackNoteThenDone(t *testing.T) {
	srv, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)
	// Both gen2 channels fail once with a non-transient error: the job switches and still finishes.
	srv.SetChannelFault("img-a", fakeupstream.Fault{Mode: fakeupstream.ServerError})
	srv.SetChannelFault("img-b", fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 300 * time.Millisecond})
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "model": "gen2"}).expect(t, 200)
	sawNote := false
	for i := 0; i < 200; i++ {
		p := e.call("GET", "/api/jobs?id="+r.str("jobId"), key, nil)
		if strings.HasPrefix(p.str("progress"), "upstream failed, switching to backup channel (") {
			sawNote = true
		}
		if p.str("status") != "pending" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	done := e.waitJob(key, r.str("jobId"))
	if done.str("status") != "done" {
		t.Fatalf("job = %s", done.Body)
	}
	if !sawNote && srv.ChannelCount("img-a", "/v1/images/generations") > 0 {
		t.Fatalf("the switch to a backup channel was never visible as progress")
	}
}

func TestFailedJobIsRefundedOnceAndCallsBack(t *testing.T) {
	srv, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)
	// The failure comes after a second, so that the balance is read while the job is still pending.
	srv.SetFault(fakeupstream.Fault{Mode: fakeupstream.ServerError, Delay: time.Second})
	recv := newReceiver(t)
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "resolution": "2k", "model": "img-a", "callback_url": recv.srv.URL}).expect(t, 200)
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 8 {
		t.Fatalf("credits after submit = %v, want 8", b.num("credits"))
	}
	done := e.waitJob(key, r.str("jobId"))
	if done.str("status") != "failed" || done.str("error") == "" || done.str("cdn_url") != "" {
		t.Fatalf("job = %s", done.Body)
	}
	if strings.Contains(done.str("error"), "img-a") || strings.Contains(done.str("error"), "prov-") {
		t.Fatalf("error leaks an upstream name: %s", done.str("error"))
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 10 {
		t.Fatalf("credits after failure = %v, want 10 (refunded in full)", b.num("credits"))
	}
	cb := recv.wait(t, 1)[0]
	var body map[string]any
	_ = json.Unmarshal(cb.body, &body)
	if body["status"] != "failed" || body["error"] == nil {
		t.Fatalf("callback = %s", cb.body)
	}
	// A second failure report changes nothing: refunded once.
	if err := e.app.Jobs().FailJob(t.Context(), r.str("jobId"), "again"); err != nil {
		t.Fatal(err)
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 10 {
		t.Fatalf("credits after a repeated failure = %v, want 10", b.num("credits"))
	}
}

func TestBatchIsAllOrNothing(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	items := func(n int) []map[string]any {
		out := make([]map[string]any, n)
		for i := range out {
			out[i] = map[string]any{"prompt": fmt.Sprintf("item %d", i)}
		}
		return out
	}
	r := e.call("POST", "/api/generate-batch", key, map[string]any{"items": items(33)}).expect(t, 400)
	if !strings.Contains(r.str("error"), "32") {
		t.Fatalf("error = %q", r.str("error"))
	}
	bad := items(3)
	bad[2]["quality"] = "ultra"
	r = e.call("POST", "/api/generate-batch", key, map[string]any{"items": bad}).expect(t, 400)
	if !strings.HasPrefix(r.str("error"), "items[2]") {
		t.Fatalf("error = %q, want it to name items[2]", r.str("error"))
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 100 {
		t.Fatalf("credits after rejected batches = %v, want 100", b.num("credits"))
	}
	r = e.call("POST", "/api/generate-batch", key, map[string]any{"items": items(3)}).expect(t, 200)
	js := r.JSON["jobs"].([]any)
	if len(js) != 3 {
		t.Fatalf("jobs = %s", r.Body)
	}
	for _, j := range js {
		id := j.(map[string]any)["jobId"].(string)
		if e.waitJob(key, id).str("status") != "done" {
			t.Fatalf("batch job %s did not finish", id)
		}
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 97 {
		t.Fatalf("credits = %v, want 97", b.num("credits"))
	}
	_, poorKey := e.tenant("Poor", 2)
	e.call("POST", "/api/generate-batch", poorKey, map[string]any{"items": items(3)}).expect(t, 402)
	if b := e.call("GET", "/api/balance", poorKey, nil); b.num("credits") != 2 {
		t.Fatalf("credits after a refused batch = %v, want 2", b.num("credits"))
	}
}

func TestGenerateRateLimit(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake, withVar("SERVICE_GENERATE_RATE", "5"))
	_, key := e.tenant("Acme", 100)
	for i := 0; i < 5; i++ {
		e.call("POST", "/api/generate", key, map[string]any{"prompt": "x"}).expect(t, 200)
	}
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x"}).expect(t, 429)
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 95 {
		t.Fatalf("credits = %v, want 95 (the refused call charges nothing)", b.num("credits"))
	}
	_, other := e.tenant("Other", 10)
	e.call("POST", "/api/generate", other, map[string]any{"prompt": "x"}).expect(t, 200)
}

func TestDefaultRateLimitIs120PerHour(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 1000)
	items := make([]map[string]any, 30)
	for i := range items {
		items[i] = map[string]any{"prompt": "x"}
	}
	for i := 0; i < 4; i++ {
		e.call("POST", "/api/generate-batch", key, map[string]any{"items": items}).expect(t, 200)
	}
	e.call("POST", "/api/generate", key, map[string]any{"prompt": "the 121st"}).expect(t, 429)
}

func TestJobsVisibility(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	_, otherKey := e.tenant("Other", 100)
	_, login := e.personalLogin("me@example.com", 5)
	mine := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x"}).expect(t, 200).str("jobId")
	theirs := e.call("POST", "/api/generate", otherKey, map[string]any{"prompt": "x"}).expect(t, 200).str("jobId")
	personal := e.callH("POST", "/api/generate", map[string]string{"Authorization": "Bearer " + login}, map[string]any{"prompt": "x"}).expect(t, 200).str("jobId")
	e.call("GET", "/api/jobs?id="+theirs, key, nil).expect(t, 404)
	e.call("GET", "/api/jobs?id="+mine, otherKey, nil).expect(t, 404)
	e.callH("GET", "/api/jobs?id="+mine, map[string]string{"Authorization": "Bearer " + login}, nil).expect(t, 404)
	e.callH("GET", "/api/jobs?id="+personal, map[string]string{"Authorization": "Bearer " + login}, nil).expect(t, 200)
	list := e.call("GET", "/api/jobs", key, nil).expect(t, 200)
	js := list.JSON["jobs"].([]any)
	if len(js) != 1 || js[0].(map[string]any)["jobId"] != mine {
		t.Fatalf("tenant list = %s", list.Body)
	}
	e.call("GET", "/api/jobs?status=weird", key, nil).expect(t, 400)
	e.call("GET", "/api/jobs?cursor=@@", key, nil).expect(t, 400)
	e.call("GET", "/api/jobs?id="+mine, e.adminKey, nil).expect(t, 403)
	if b := e.callH("GET", "/api/balance", map[string]string{"Authorization": "Bearer " + login}, nil); b.num("credits") != 4 {
		t.Fatalf("personal credits = %v, want 4", b.num("credits"))
	}
}

func TestJobsPagination(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 100)
	items := make([]map[string]any, 5)
	for i := range items {
		items[i] = map[string]any{"prompt": "x"}
	}
	e.call("POST", "/api/generate-batch", key, map[string]any{"items": items}).expect(t, 200)
	seen := map[string]bool{}
	cursor := ""
	for page := 0; page < 5; page++ {
		path := "/api/jobs?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := e.call("GET", path, key, nil).expect(t, 200)
		for _, j := range r.JSON["jobs"].([]any) {
			seen[j.(map[string]any)["jobId"].(string)] = true
		}
		next, _ := r.JSON["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 5 {
		t.Fatalf("pagination saw %d distinct jobs, want 5", len(seen))
	}
}

func TestReferenceImagesMustBeCommittedUploads(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)
	up := e.upload(key, fileField("ref.png", "image/png", samplePNG())).expect(t, 200)
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "reference_images": []string{up.str("url")}}).expect(t, 200)
	if done := e.waitJob(key, r.str("jobId")); done.str("status") != "done" {
		t.Fatalf("job with an uploaded reference = %s", done.Body)
	}
	pending := e.app.Config.CDNURL + "/uploads/tenant-x/" + models.NewID() + ".png"
	if err := e.app.DB.Gorm.Create(&models.Upload{ID: models.NewID(), OwnerKind: "tenant", OwnerID: "x", Key: "k-" + models.NewID(), URL: pending,
		MediaType: "image", MIME: "image/png", Size: 10, Committed: false}).Error; err != nil {
		t.Fatal(err)
	}
	e.app.DB.Gorm.Model(&models.Upload{}).Where("url = ?", pending).Update("committed", false)
	bad := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "reference_images": []string{pending}}).expect(t, 400)
	if !strings.Contains(bad.str("error"), "committed upload") {
		t.Fatalf("error = %q", bad.str("error"))
	}
}

// A binding set by the administrator applies to the tenant's next submit, although its key was already
// resolved (and cached); unbinding lifts it the same way, for the tenant key and its member keys.
func TestTenantBindingAppliesAtOnce(t *testing.T) {
	srv, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	tid, key := e.tenant("Acme", 20)
	_, member := e.member(key, map[string]any{})
	run := func(k string) {
		t.Helper()
		r := e.call("POST", "/api/generate", k, map[string]any{"prompt": "x"}).expect(t, 200)
		if done := e.waitJob(k, r.str("jobId")); done.str("status") != "done" {
			t.Fatalf("job = %s", done.Body)
		}
	}
	gen3 := func() int { return srv.ChannelCount("img-c", "/v1/images/generations") }
	run(key)
	run(member)
	e.admin(map[string]any{"action": "tenant-bind", "tenant_id": tid, "model": "gen3"}).expect(t, 200)
	before := gen3()
	for i := 0; i < 4; i++ {
		run(key)
		run(member)
	}
	if got := gen3() - before; got != 8 {
		t.Fatalf("bound to gen3: %d of 8 jobs went to gen3", got)
	}
	e.admin(map[string]any{"action": "tenant-bind", "tenant_id": tid, "model": ""}).expect(t, 200)
	before = gen3()
	for i := 0; i < 6; i++ {
		r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "model": "gen2"}).expect(t, 200)
		e.waitJob(key, r.str("jobId"))
	}
	if got := gen3() - before; got != 0 {
		t.Fatalf("unbound, model gen2: %d jobs still went to gen3", got)
	}
}

// SERVICE_WORKERS bounds the queue's runs at once, not the generations: a generation waits on its upstream
// without holding a worker (jobs/inflight.go), so one worker keeps three slow generations in flight
// together. It must be a positive number.
func TestOneWorkerKeepsGenerationsInFlightTogether(t *testing.T) {
	srv, fake := fakeUpstreams(t)
	srv.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 400 * time.Millisecond})
	e := newEnv(t, fake, withVar("SERVICE_WORKERS", "1"))
	_, key := e.tenant("Acme", 10)
	start := time.Now()
	var ids []string
	for i := range 3 {
		ids = append(ids, e.call("POST", "/api/generate", key, map[string]any{"prompt": fmt.Sprintf("a fox %d", i)}).expect(t, 200).str("jobId"))
	}
	for _, id := range ids {
		if r := e.waitJob(key, id); r.str("status") != "done" {
			t.Fatalf("job = %s", r.Body)
		}
	}
	if d := time.Since(start); d >= 3*400*time.Millisecond {
		t.Errorf("three jobs of 400 ms each, one worker: all ended after %s, so they waited for the worker in turn", d)
	}
	_, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) {
		if v.Env == "SERVICE_WORKERS" {
			return "0", true
		}
		return "", false
	})
	if err == nil || !strings.Contains(err.Error(), "SERVICE_WORKERS") {
		t.Errorf("SERVICE_WORKERS=0: %v, want an error naming it", err)
	}
}

// TestPersonalCallbackVerifiesWithTheWhoamiSecret: a personal login reads its callback secret in
// GET /api/whoami and verifies its callbacks with it as Standard Webhooks says (HMAC-SHA256 of
// "id.timestamp.body" keyed by the base64 after whsec_).
func TestPersonalCallbackVerifiesWithTheWhoamiSecret(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, tok := e.personalLogin("me@example.com", 10)
	_, other := e.personalLogin("other@example.com", 0)
	secret := e.call("GET", "/api/whoami", tok, nil).expect(t, 200).str("callback_secret")
	if !strings.HasPrefix(secret, "whsec_") || secret == e.call("GET", "/api/whoami", other, nil).expect(t, 200).str("callback_secret") {
		t.Fatalf("callback_secret = %q: want a whsec_ secret of this person only", secret)
	}
	recv := newReceiver(t)
	jobID := e.call("POST", "/api/generate", tok, map[string]any{"prompt": "a cat", "callback_url": recv.srv.URL + "/hook"}).expect(t, 200).str("jobId")
	got := recv.wait(t, 1)[0]
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(got.header.Get("webhook-id") + "." + got.header.Get("webhook-timestamp") + "."))
	mac.Write(got.body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if got.header.Get("webhook-id") != jobID || got.header.Get("webhook-signature") != want {
		t.Fatalf("signature %q does not verify with the whoami secret (want %q)", got.header.Get("webhook-signature"), want)
	}
}
