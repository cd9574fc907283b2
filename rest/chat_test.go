package rest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"

	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
)

func init() {
	// Streamed chat answers are documented as text/event-stream; validate them as text.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
}

// withUpstreams replaces the upstream configuration.
func withUpstreams(cfgs ...upstream.Config) envOption {
	return func(c *envConfig) { c.opts.Upstreams = cfgs }
}

// chatChannel returns an OpenAI-protocol chat channel on base named name.
func chatChannel(name, base string, caps ...upstream.Capability) upstream.Config {
	return upstream.Config{Name: name, Provider: "prov-" + name, Media: upstream.MediaChat, Family: "chat", Protocol: upstream.ProtocolOpenAI,
		BaseURL: base, APIKey: "test", Model: "model-" + name, Capabilities: caps, SoftTimeout: 2 * time.Second, Rating: 0.5}
}

// usageToday flushes the batched usage counts and returns today's row of the tenant's usage report.
func (e *env) usageToday(tenantKey string) map[string]any {
	e.t.Helper()
	if err := e.app.Credits().FlushUsage(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	daily := e.call("GET", "/api/tenant-usage?days=1", tenantKey, nil).expect(e.t, 200).JSON["daily"].([]any)
	return daily[len(daily)-1].(map[string]any)
}

// leaks fails the test when body names an upstream channel, provider or upstream model.
func leaks(t *testing.T, body []byte, names ...string) {
	t.Helper()
	for _, n := range append(names, "prov-", "model-chat", "chat-a") {
		if bytes.Contains(body, []byte(n)) {
			t.Fatalf("answer leaks %q: %s", n, body)
		}
	}
}

func chatBody(stream bool) map[string]any {
	return map[string]any{"model": "service-auto", "stream": stream,
		"messages": []any{map[string]any{"role": "user", "content": "hello"}}}
}

func TestChatCompletionsRefusesOtherModelsAndBadBodies(t *testing.T) {
	fake, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	cases := []struct {
		name  string
		body  any
		msg   string
		code  string // OpenAI's code
		param any    // OpenAI's param: the field at fault, or nil
	}{
		{"a specific model", map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "service-auto", "model_not_found", "model"},
		{"auto", map[string]any{"model": "auto", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "service-auto", "model_not_found", "model"},
		{"no model", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "service-auto", "model_not_found", "model"},
		{"no messages", map[string]any{"model": "service-auto"}, "messages", "invalid", "messages"},
		{"empty messages", map[string]any{"model": "service-auto", "messages": []any{}}, "messages", "invalid", "messages"},
		{"stream not a boolean", map[string]any{"model": "service-auto", "stream": "yes", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "stream", "invalid", "stream"},
		{"not JSON", `{"model":`, "JSON", "invalid", nil},
		{"not an object", `[1,2]`, "JSON object", "invalid", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/chat/completions", key, c.body).expect(t, 400)
			if msg := r.openAIError(t, "invalid_request_error", c.code); !strings.Contains(msg, c.msg) {
				t.Fatalf("error = %q, want it to mention %q", msg, c.msg)
			}
			if p := r.JSON["error"].(map[string]any)["param"]; p != c.param {
				t.Fatalf("param = %v, want %v: %s", p, c.param, r.Body)
			}
		})
	}
	if n := fake.Count("/v1/chat/completions"); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
	e.call("POST", "/api/chat/completions", e.adminKey, chatBody(false)).expect(t, 403)
	e.call("POST", "/api/chat/completions", "", chatBody(false)).expect(t, 401)
}

func TestChatCompletionsAnswersWithoutLeakingTheUpstream(t *testing.T) {
	fake, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	r := e.call("POST", "/api/chat/completions", key, chatBody(false)).expect(t, 200)
	choices, _ := r.JSON["choices"].([]any)
	if r.str("model") != "service-auto" || len(choices) != 1 ||
		choices[0].(map[string]any)["message"].(map[string]any)["content"] != "fake reply" {
		t.Fatalf("answer = %s", r.Body)
	}
	leaks(t, r.Body)
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "openai") {
			t.Errorf("upstream header %s passed on", k)
		}
	}
	// The upstream got the body with its own model.
	var sent map[string]any
	_ = json.Unmarshal(fake.LastRequest("/v1/chat/completions").Body, &sent)
	if sent["model"] != "model-chat-a" || sent["messages"] == nil {
		t.Fatalf("upstream request = %v", sent)
	}
	if e.call("GET", "/api/balance", key, nil).num("credits") != 0 {
		t.Fatal("chat must be free")
	}
}

// sseEvent is one server-sent event as the client saw it.
type sseEvent struct {
	data string
	at   time.Duration
}

// streamChat posts a streaming chat request and reads the events as they arrive.
func (e *env) streamChat(key string, headers map[string]string) (*http.Response, []sseEvent, []byte) {
	e.t.Helper()
	return e.streamChatBody(key, headers, chatBody(true))
}

// streamChatBody posts a streaming chat request with the given body and reads the events as they arrive.
func (e *env) streamChatBody(key string, headers map[string]string, body map[string]any) (*http.Response, []sseEvent, []byte) {
	e.t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/chat/completions", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var events []sseEvent
	var all bytes.Buffer
	br := bufio.NewReader(io.TeeReader(res.Body, &all))
	for {
		line, err := br.ReadString('\n')
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
			events = append(events, sseEvent{data: d, at: time.Since(start)})
		}
		if err != nil {
			break
		}
	}
	out := &resp{Status: res.StatusCode, Header: res.Header, Body: all.Bytes()}
	e.validate(req, raw, out)
	return res, events, all.Bytes()
}

func TestChatCompletionsStreamsChunkByChunk(t *testing.T) {
	fake, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	const chunks, delay = 5, 150 * time.Millisecond
	fake.SetStream(chunks, delay)
	res, events, body := e.streamChat(key, nil)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream answer %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	// role, 5 content chunks, stop, [DONE]
	if len(events) != chunks+3 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("events = %d, last %v; body:\n%s", len(events), events[len(events)-1], body)
	}
	if !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream does not end with data: [DONE]:\n%s", body)
	}
	var text strings.Builder
	for i, ev := range events[:len(events)-1] {
		var chunk struct {
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.data), &chunk); err != nil || chunk.Model != "service-auto" {
			t.Fatalf("event %d = %s (%v)", i, ev.data, err)
		}
		text.WriteString(chunk.Choices[0].Delta.Content)
	}
	if text.String() != "chunk-0 chunk-1 chunk-2 chunk-3 chunk-4 " {
		t.Fatalf("streamed text = %q", text.String())
	}
	leaks(t, body)
	// Chunk by chunk: the first content chunk arrives about one delay in, well before the last, and
	// each arrives about one delay after the previous one.
	first, last := events[1].at, events[chunks].at
	if first > 2*delay || last-first < time.Duration(chunks-2)*delay {
		t.Fatalf("first content chunk at %s, last at %s: not relayed as it arrived (delay %s)", first, last, delay)
	}
	for i := 2; i <= chunks; i++ {
		if gap := events[i].at - events[i-1].at; gap < delay/2 {
			t.Fatalf("chunk %d came %s after chunk %d: chunks were batched", i, gap, i-1)
		}
	}
	t.Logf("first content chunk after %s, last after %s", first.Round(time.Millisecond), last.Round(time.Millisecond))
}

func TestChatIsCountedInUsageWithTheAgent(t *testing.T) {
	_, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	tenantID, key := e.tenant("Acme", 0)
	e.call("POST", "/api/chat/completions", key, chatBody(false)).expect(t, 200)
	e.streamChat(key, map[string]string{"X-CS-Agent": "writer-bot"})
	r := e.callH("POST", "/api/chat", map[string]string{"X-API-Key": key, "X-CS-Agent": "helper-bot"},
		map[string]any{"messages": []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": "hi"}}}).expect(t, 200)
	msg, _ := r.JSON["message"].(map[string]any)
	if r.JSON["ok"] != true || msg["role"] != "assistant" || msg["content"] != "fake reply" {
		t.Fatalf("agent chat = %s", r.Body)
	}
	leaks(t, r.Body)
	e.callH("POST", "/api/chat", map[string]string{"X-API-Key": key, "X-CS-Agent": "helper-bot"}, map[string]any{"message": "hello"}).expect(t, 200)
	e.call("POST", "/api/chat", key, map[string]any{"message": map[string]any{"content": "hello"}}).expect(t, 200)

	today := e.usageToday(key)
	if today["chat"] != 5.0 || today["total"] != 5.0 {
		t.Fatalf("usage today = %v, want 5 chat calls", today)
	}
	var rows []models.UsageDaily
	e.app.DB.Gorm.Where("tenant_id = ?", tenantID).Order("agent_id").Find(&rows)
	agents := map[string]int64{}
	for _, row := range rows {
		agents[row.AgentID] += row.Count
	}
	if agents["helper-bot"] != 2 || agents["writer-bot"] != 1 || agents[""] != 2 {
		t.Fatalf("usage by agent = %v, want helper-bot 2, writer-bot 1, none 2", agents)
	}
}

func TestAgentChatValidates(t *testing.T) {
	fake, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	for _, body := range []any{
		map[string]any{},
		map[string]any{"messages": []any{}},
		map[string]any{"message": "hi", "messages": []any{map[string]any{"role": "user", "content": "hi"}}},
		map[string]any{"messages": []any{map[string]any{"role": "robot", "content": "hi"}}},
		map[string]any{"messages": []any{map[string]any{"role": "user", "content": " "}}},
		map[string]any{"message": 42},
	} {
		e.call("POST", "/api/chat", key, body).expect(t, 400)
	}
	if n := fake.Count("/v1/chat/completions"); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
	e.call("POST", "/api/chat", e.adminKey, map[string]any{"message": "hi"}).expect(t, 403)
}

func TestChatFallsBackBeforeTheFirstByte(t *testing.T) {
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	e := newEnv(t, withUpstreams(chatChannel("chat-a", fake.ChannelURL("chat-a")), chatChannel("chat-b", fake.ChannelURL("chat-b"))))
	_, key := e.tenant("Acme", 0)
	fake.SetChannelFault("chat-a", fakeupstream.Fault{Mode: fakeupstream.ServerError})
	for range 4 {
		r := e.call("POST", "/api/chat/completions", key, chatBody(false)).expect(t, 200)
		leaks(t, r.Body, "chat-b")
		_, events, body := e.streamChat(key, nil)
		if len(events) == 0 || events[len(events)-1].data != "[DONE]" {
			t.Fatalf("stream after a failing upstream:\n%s", body)
		}
	}
	fake.SetChannelFault("chat-b", fakeupstream.Fault{Mode: fakeupstream.ServerError})
	r := e.call("POST", "/api/chat/completions", key, chatBody(false)).expect(t, 503)
	leaks(t, r.Body, "chat-b")
}

// cuttingServer streams one chat chunk and then drops the connection; it counts its requests.
func cuttingServer(t *testing.T, requests *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"model-cut","choices":[{"index":0,"delta":{"content":"partial"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond)
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func TestChatStreamIsNotSwitchedOnceStarted(t *testing.T) {
	var requests atomic.Int32
	cut := cuttingServer(t, &requests)
	e := newEnv(t, withUpstreams(chatChannel("chat-cut-1", cut), chatChannel("chat-cut-2", cut)))
	_, key := e.tenant("Acme", 0)
	res, events, body := e.streamChat(key, nil)
	if res.StatusCode != 200 || len(events) != 2 || !strings.Contains(events[0].data, `"content":"partial"`) {
		t.Fatalf("cut stream = %d:\n%s", res.StatusCode, body)
	}
	if !strings.Contains(events[1].data, `"error"`) || strings.Contains(string(body), "[DONE]") {
		t.Fatalf("a broken stream must end with an error event, not [DONE]:\n%s", body)
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("the upstreams saw %d requests: the relay switched upstream after the answer started", n)
	}
	leaks(t, body, "model-cut", "chat-cut")
}
