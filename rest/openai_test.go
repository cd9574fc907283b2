package rest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream"
)

// openAIError checks that an answer is an OpenAI-shaped error of the type and code and returns its message.
func (r *resp) openAIError(t *testing.T, typ, code string) string {
	t.Helper()
	detail, ok := r.JSON["error"].(map[string]any)
	if !ok || detail["type"] != typ || detail["code"] != code {
		t.Fatalf("error body = %s, want OpenAI's {error: {message, type %q, code %q}}", r.Body, typ, code)
	}
	msg, _ := detail["message"].(string)
	if msg == "" {
		t.Fatalf("error body = %s: no message", r.Body)
	}
	return msg
}

func TestOpenAIModelList(t *testing.T) {
	_, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	r := e.callH("GET", "/api/models", map[string]string{"Authorization": "Bearer " + key}, nil).expect(t, 200)
	data, _ := r.JSON["data"].([]any)
	if r.str("object") != "list" || len(data) != 2 {
		t.Fatalf("models = %s, want a list of service-auto and the chat family", r.Body)
	}
	var ids []string
	for _, m := range data {
		m := m.(map[string]any)
		if m["object"] != "model" || m["owned_by"] != "studio" {
			t.Fatalf("model object = %v", m)
		}
		ids = append(ids, m["id"].(string))
	}
	if strings.Join(ids, ",") != "service-auto,chat" {
		t.Fatalf("model ids = %v, want service-auto then the chat family", ids)
	}
	leaks(t, r.Body, "img-", "gen2")
	if got := e.call("GET", "/api/models/service-auto", key, nil).expect(t, 200); got.str("id") != "service-auto" || got.str("object") != "model" {
		t.Fatalf("retrieve = %s", got.Body)
	}
	if r := e.call("GET", "/api/models/gpt-4o", key, nil).expect(t, 404); r.openAIError(t, "not_found_error", "model_not_found") != "" &&
		r.JSON["error"].(map[string]any)["param"] != "model" {
		t.Fatalf("unknown model: %s, want param model", r.Body)
	}
	e.call("GET", "/api/models", "", nil).expect(t, 401).openAIError(t, "authentication_error", "unauthenticated")
	// The rest of the API keeps the spec's {"error": "<message>"}.
	if r := e.call("GET", "/api/available-models", "", nil).expect(t, 401); r.str("error") == "" || r.str("code") != "unauthenticated" {
		t.Fatalf("spec-shaped error = %s", r.Body)
	}
}

func TestChatErrorsHaveOpenAIShape(t *testing.T) {
	_, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	e.call("POST", "/api/chat/completions", "", chatBody(false)).expect(t, 401).openAIError(t, "authentication_error", "unauthenticated")
	e.call("POST", "/api/chat/completions", e.adminKey, chatBody(false)).expect(t, 403).openAIError(t, "permission_error", "forbidden")
	r := e.call("POST", "/api/chat/completions", key, map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}).expect(t, 400)
	if msg := r.openAIError(t, "invalid_request_error", "model_not_found"); !strings.Contains(msg, "service-auto") {
		t.Fatalf("message = %q", msg)
	}
}

func TestChatStreamEndsWithUsageWhenAsked(t *testing.T) {
	fake, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	fake.SetStream(3, 0)
	body := chatBody(true)
	body["stream_options"] = map[string]any{"include_usage": true}
	res, events, raw := e.streamChatBody(key, nil, body)
	if res.StatusCode != 200 || len(events) < 3 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("stream = %d:\n%s", res.StatusCode, raw)
	}
	var last struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []any  `json:"choices"`
		Usage   *struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(events[len(events)-2].data), &last); err != nil {
		t.Fatal(err)
	}
	if last.Usage == nil || last.Choices == nil || len(last.Choices) != 0 || last.Object != "chat.completion.chunk" || last.Model != "service-auto" ||
		last.ID != "chatcmpl-fake" || last.Usage.Prompt < 1 || last.Usage.Completion < 1 || last.Usage.Total != last.Usage.Prompt+last.Usage.Completion {
		t.Fatalf("the chunk before [DONE] = %s, want an empty-choices chunk with usage", events[len(events)-2].data)
	}
	if res.Header.Get("X-Request-ID") == "" {
		t.Fatal("a streamed answer has no X-Request-ID")
	}
	// Without include_usage no usage chunk is added.
	_, events, raw = e.streamChat(key, nil)
	if strings.Contains(string(raw), `"usage"`) || len(events) != 3+3 {
		t.Fatalf("a stream without include_usage got a usage chunk:\n%s", raw)
	}
}

// TestWholeChatAnswerAlwaysHasUsage: an upstream whose answer has no usage gets an estimate added.
func TestWholeChatAnswerAlwaysHasUsage(t *testing.T) {
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"chatcmpl-bare","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"a reply of some length"}}]}`))
	}))
	defer bare.Close()
	e := newEnv(t, withUpstreams(upstream.Config{Name: "bare", Provider: "prov-bare", Media: upstream.MediaChat, Family: "chat",
		Protocol: upstream.ProtocolOpenAI, BaseURL: bare.URL, APIKey: "test", Model: "m", SoftTimeout: 2 * time.Second, Rating: 0.5}))
	_, key := e.tenant("Acme", 0)
	r := e.call("POST", "/api/chat/completions", key, chatBody(false)).expect(t, 200)
	u, _ := r.JSON["usage"].(map[string]any)
	if u == nil || u["prompt_tokens"].(float64) < 1 || u["completion_tokens"].(float64) != 6 || u["total_tokens"].(float64) != u["prompt_tokens"].(float64)+6 {
		t.Fatalf("answer = %s, want usage with an estimate (22 characters: 6 completion tokens)", r.Body)
	}
	if r.Header.Get("X-Request-ID") == "" {
		t.Fatal("no X-Request-ID")
	}
	// An upstream's own usage is passed on unchanged.
	_, opt := fakeUpstreams(t)
	e2 := newEnv(t, opt)
	_, key2 := e2.tenant("Acme", 0)
	r = e2.call("POST", "/api/chat/completions", key2, chatBody(false)).expect(t, 200)
	if u, _ := r.JSON["usage"].(map[string]any); u == nil || u["prompt_tokens"] != 10.0 || u["completion_tokens"] != 5.0 {
		t.Fatalf("upstream usage not passed on: %s", r.Body)
	}
}

func TestEveryAnswerHasARequestID(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path string }{{"GET", "/api/health"}, {"GET", "/api/nothing"}, {"GET", "/api/balance"}, {"GET", "/api/models"}} {
		e.skipSpec = c.path == "/api/nothing"
		r := e.call(c.method, c.path, "", nil)
		if len(r.Header.Get("X-Request-ID")) < 8 {
			t.Fatalf("%s %s -> %d without X-Request-ID", c.method, c.path, r.Status)
		}
	}
	r := e.callH("GET", "/api/health", map[string]string{"X-Request-ID": "client-chosen-42"}, nil)
	if r.Header.Get("X-Request-ID") != "client-chosen-42" {
		t.Fatalf("X-Request-ID = %q, want the client's own", r.Header.Get("X-Request-ID"))
	}
}
