package relay

import (
	"strings"
	"testing"
)

func TestRewriteModels(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"model":"gpt-4o-2024-08-06","x":1}`, `{"model":"service-auto","x":1}`},
		{`data: {"id":"c","model" : "m-1","choices":[]}` + "\n", `data: {"id":"c","model" : "service-auto","choices":[]}` + "\n"},
		{`{"a":{"model":"inner"},"model":"outer"}`, `{"a":{"model":"service-auto"},"model":"service-auto"}`},
		{`{"model":"with \"quote\" inside"}`, `{"model":"service-auto"}`},
		{`{"content":"say \"model\":\"x\" please","model":"m"}`, `{"content":"say \"model\":\"x\" please","model":"service-auto"}`},
		{`{"content":"the \"model\"","model":"m"}`, `{"content":"the \"model\"","model":"service-auto"}`},
		{`{"model":null}`, `{"model":null}`},
		{`["model","x"]`, `["model","x"]`},
		{`{"models":"m"}`, `{"models":"m"}`},
		{`{"model":"unterminated`, `{"model":"unterminated`},
		{`data: [DONE]`, `data: [DONE]`},
		{``, ``},
	}
	for _, c := range cases {
		if got := string(rewriteModels(nil, []byte(c.in))); got != c.want {
			t.Errorf("rewriteModels(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	// It appends to dst.
	if got := string(rewriteModels([]byte("x"), []byte(`{"model":"m"}`))); got != `x{"model":"service-auto"}` {
		t.Errorf("append = %s", got)
	}
}

func TestCheckChatBody(t *testing.T) {
	ok := `{"model":"service-auto","messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ body, err string }{
		{ok + `}`, ""},
		{ok + `,"stream":true}`, ""},
		{ok + `,"stream":false,"temperature":0.2}`, ""},
		{ok + `,"stream":null}`, ""},
		{ok + `,"stream":1}`, "stream"},
		{`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, "service-auto"},
		{`{"model":"Service-Auto","messages":[{"role":"user","content":"hi"}]}`, "service-auto"},
		{`{"model":"service-auto","messages":{}}`, "messages"},
		{`{"model":"service-auto"`, "JSON object"},
		{`"service-auto"`, "JSON object"},
		{ok + `,"stream":true,"stream_options":{"include_usage":"yes"}}`, "include_usage"},
	} {
		_, err := checkChatBody([]byte(c.body))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.body, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want one mentioning %q", c.body, err, c.err)
		}
	}
}

func BenchmarkRewriteModelsChunk(b *testing.B) {
	line := []byte(`data: {"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1763800000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}` + "\n")
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = rewriteModels(buf[:0], line)
	}
}
