package httpmw_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"studio/cmd/server/httpmw"
	"studio/models"
)

// refusal records what the middleware refused, in place of REST's error encoder.
type refusal struct{ err error }

func (f *refusal) refuse(w http.ResponseWriter, _ *http.Request, err error) {
	f.err = err
	w.WriteHeader(599)
}

func TestMiddlewareRequestIDLogAndHeaders(t *testing.T) {
	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	var seen string
	h := httpmw.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = models.RequestID(r.Context())
		models.SetLogAttr(r.Context(), "identity", "tenant:t1")
		_, _ = io.WriteString(w, "hello")
	}), (&refusal{}).refuse)

	req := httptest.NewRequest("GET", "/api/x", nil)
	req.Header.Set("X-Request-ID", "client-chosen-42")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if seen != "client-chosen-42" || rec.Header().Get("X-Request-ID") != "client-chosen-42" {
		t.Fatalf("request id seen %q, answered %q; want the client's own", seen, rec.Header().Get("X-Request-ID"))
	}
	if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Referrer-Policy") == "" {
		t.Fatalf("security headers missing: %v", rec.Header())
	}
	line := logged.String()
	for _, want := range []string{"msg=http", "request_id=client-chosen-42", "path=/api/x", "status=200", "bytes=5", "identity=tenant:t1"} {
		if !strings.Contains(line, want) {
			t.Errorf("access log %q lacks %s", line, want)
		}
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/x", nil))
	if id := rec.Header().Get("X-Request-ID"); len(id) != 16 || id != seen {
		t.Fatalf("generated request id %q (handler saw %q), want 16 hexadecimal digits", id, seen)
	}
}

func TestMiddlewareAnswersAPanic(t *testing.T) {
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	f := &refusal{}
	h := httpmw.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), f.refuse)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	var e *models.Error
	if rec.Code != 599 || !errors.As(f.err, &e) || e.Kind != models.KindInternal || e.Error() != "internal error" {
		t.Fatalf("panic answered %d with %v, want refuse with an internal error", rec.Code, f.err)
	}
}

func TestHSTSOnlyOverHTTPS(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for base, want := range map[string]bool{"https://studio.example": true, "http://localhost:8080": false, "": false} {
		rec := httptest.NewRecorder()
		httpmw.HSTS(base, ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if got := rec.Header().Get("Strict-Transport-Security") != ""; got != want {
			t.Errorf("base %q: HSTS %v, want %v", base, got, want)
		}
	}
}

func TestTextGuard(t *testing.T) {
	var body []byte
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { body, _ = io.ReadAll(r.Body) })
	f := &refusal{}
	h := httpmw.TextGuard(next, 64, f.refuse)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/x", strings.NewReader(`{"items":[{"prompt":"a\u0000b"}]}`)))
	if rec.Code != 599 || f.err == nil || !strings.Contains(f.err.Error(), `"items[0].prompt"`) {
		t.Fatalf("NUL in a JSON body: %d %v, want refused naming items[0].prompt", rec.Code, f.err)
	}

	f.err = nil
	good := `{"prompt":"fine"}`
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/api/x", strings.NewReader(good)))
	if f.err != nil || string(body) != good {
		t.Fatalf("good body: refused %v, endpoint read %q", f.err, body)
	}

	long := `{"prompt":"` + strings.Repeat("x", 80) + "\x00\"}"
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/api/x", strings.NewReader(long)))
	if f.err != nil || string(body) != long {
		t.Fatalf("body over the bound: refused %v, endpoint read %d bytes; want it passed whole to the endpoint", f.err, len(body))
	}

	req := httptest.NewRequest("GET", "/api/x", nil)
	req.Header.Set("X-API-Key", "sk-\xff")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if f.err == nil || !strings.Contains(f.err.Error(), "X-API-Key header") {
		t.Fatalf("invalid UTF-8 in X-API-Key: %v, want refused", f.err)
	}
}
