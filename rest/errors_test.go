package rest_test

import (
	"testing"
)

// TestErrorBodiesCarryStableCodes checks that every kind of failure answers the spec's message in
// `error` and a stable `code` beside it, with the status of its kind.
func TestErrorBodiesCarryStableCodes(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 1)
	_, acct := e.member(key, map[string]any{})
	e.skipSpec = true // the router's own refusals are not operations of the document
	cases := []struct {
		name, method, path, key string
		body                    any
		status                  int
		code                    string
	}{
		{"invalid input", "POST", "/api/generate", key, map[string]any{"prompt": ""}, 400, "invalid"},
		{"malformed JSON", "POST", "/api/generate", key, `{"prompt":`, 400, "invalid"},
		{"no capable upstream", "POST", "/api/generate", key, map[string]any{"prompt": "x", "image_url": "https://example.com/a.png", "mask": "https://example.com/m.png"}, 400, "no_upstream"},
		{"no credential", "GET", "/api/balance", "", nil, 401, "unauthenticated"},
		{"insufficient credits", "POST", "/api/generate", key, map[string]any{"prompt": "x", "resolution": "4k"}, 402, "insufficient_credits"},
		{"wrong kind of key", "GET", "/api/tenant-stats", acct, nil, 403, "forbidden"},
		{"unknown job", "GET", "/api/jobs?id=00000000-0000-0000-0000-000000000000", key, nil, 404, "not_found"},
		{"no such endpoint", "GET", "/api/nothing-here", key, nil, 404, "no_endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call(c.method, c.path, c.key, c.body)
			if r.Status != c.status || r.str("code") != c.code || r.str("error") == "" {
				t.Fatalf("%s %s = %d %s, want %d with code %q and a message", c.method, c.path, r.Status, r.Body, c.status, c.code)
			}
		})
	}
	e.skipSpec = false
	// The no-upstream refusal keeps the spec's message word for word.
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "image_url": "https://example.com/a.png", "mask": "https://example.com/m.png"}).expect(t, 400)
	if r.str("error") != "当前无可用上游" {
		t.Fatalf("no-upstream message = %q, want the spec's 当前无可用上游", r.str("error"))
	}
}

// TestCreationsAnswer200 checks the status convention of the document: a creation answers 200 with
// the created object in the body, like every other success.
func TestCreationsAnswer200(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	tpl := e.call("POST", "/api/templates", key, tplImage("poster", "poster {title}")).expect(t, 200)
	if tpl.JSON["template"] == nil {
		t.Fatalf("template creation body = %s", tpl.Body)
	}
	e.call("POST", "/api/generate", key, map[string]any{"prompt": "x"}).expect(t, 200)
	e.call("POST", "/api/tenant-accounts", key, map[string]any{"action": "create", "email": "m2@example.com"}).expect(t, 200)
}
