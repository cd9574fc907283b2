package rest_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// TestJSONSentAsAFormIsCheckedLikeJSON is the curl -d attack: JSON sent with curl's default Content-Type
// (application/x-www-form-urlencoded), as text/plain or with no type is decoded as JSON by the surface,
// so a NUL written as \u0000 must be refused with 400 naming the field, exactly as under
// application/json, and change nothing (it answered 500 once the NUL reached PostgreSQL).
func TestJSONSentAsAFormIsCheckedLikeJSON(t *testing.T) {
	e := newEnv(t)
	e.skipSpec = true
	_, key := e.tenant("Acme", 100)
	before := dbFingerprint(t, e)
	for _, c := range []struct{ path, key, body, field string }{
		{"/api/generate", key, `{"prompt":"a\u0000b"}`, "prompt"},
		{"/api/generate", key, `{"prompt":"ok","callback_url":"http://example.com/\u0000"}`, "callback_url"},
		{"/api/auth/login", "", `{"email":"a\u0000b@example.com","password":"secret"}`, "email"},
		{"/api/auth/login", "", `{"email":"a@example.com","password":"a\u0000b"}`, "password"},
		{"/api/article", key, `{"template_slug":"tea","input":{"shop":"a\u0000b"}}`, "input.shop"},
		{"/api/admin", e.adminKey, `{"action":"tenant-create","name":"a\u0000b","credits":1}`, "name"},
		{"/api/tenant-accounts", key, `{"action":"create","email":"m@example.com","nickname":"a\u0000b"}`, "nickname"},
		{"/api/templates", key, `{"type":"article","slug":"t","zh_name":"a\u0000b"}`, "zh_name"},
	} {
		for _, ct := range bodyContentTypes {
			req, _ := http.NewRequest("POST", e.srv.URL+c.path, strings.NewReader(c.body))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			if c.key != "" {
				req.Header.Set("X-API-Key", c.key)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(res.Body)
			res.Body.Close()
			if res.StatusCode != 400 || !strings.Contains(buf.String(), `"error":"field \"`+c.field+`\" contains a NUL character`) {
				t.Errorf("%s %s as %q: %d %s, want 400 naming field %s", c.path, c.body, ct, res.StatusCode, buf.String(), c.field)
			}
		}
	}
	if after := dbFingerprint(t, e); after != before {
		t.Errorf("refused requests changed the database: %s", fingerprintDiff(before, after))
	}
}

// TestLongTextFieldsAreBoundedBeforeUse: a 200 000-character e-mail address at login (the rate-limit
// key built from it overflowed its column and answered 500) and other long fields are refused or
// handled with a 4xx; nothing answers 5xx.
func TestLongTextFieldsAreBoundedBeforeUse(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 100)
	long := strings.Repeat("a", 200_000)
	for _, c := range []struct {
		path, key string
		body      map[string]any
	}{
		{"/api/auth/login", "", map[string]any{"email": long + "@example.com", "password": "secret"}},
		{"/api/auth/login", "", map[string]any{"email": "a@example.com", "password": long}},
		{"/api/auth/login", "", map[string]any{"email": strings.Repeat("é", 200_000), "password": "secret"}},
		{"/api/auth/register/code", "", map[string]any{"email": long + "@example.com"}},
		{"/api/generate", key, map[string]any{"prompt": "x", "callback_url": "http://example.com/" + long}},
		{"/api/generate", key, map[string]any{"prompt": "x", "reference_images": []string{"http://example.com/" + long}}},
	} {
		e.skipSpec = true
		r := e.call("POST", c.path, c.key, c.body)
		if r.Status < 400 || r.Status >= 500 {
			t.Errorf("%s with a 200 000-character field: %d %.300s, want a 4xx", c.path, r.Status, r.Body)
		}
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 100 {
		t.Fatalf("credits %v, want 100", b.num("credits"))
	}
}
