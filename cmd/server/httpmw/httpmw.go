// Package httpmw is the HTTP middleware in front of every surface (REST, GraphQL, the console and the
// pages): request ids (X-Request-ID), structured access logs, security headers, the panic guard, HSTS,
// Prometheus HTTP metrics and the text guard (models/text.go applied to every request). cmd/server wraps
// the router shared by the surfaces in it; the surfaces keep only what is their own (REST's error
// encoding, its route middleware).
package httpmw

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"studio/models"
)

// Refuse answers a request that the middleware refuses (text that cannot be stored: a KindInvalid
// *models.Error) or whose handler panicked (KindInternal), in the one error form of the surfaces:
// cmd/server passes rest.WriteError ({"error": ..., "code": ...}).
type Refuse func(w http.ResponseWriter, r *http.Request, err error)

// statusRecorder remembers the status and counts the bytes of an answer, for the access log and the
// metrics (Metrics reuses the one Middleware made rather than wrapping the writer again).
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer (flush, deadlines).
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Header values every answer carries: shared, never modified (net/http only reads them).
var (
	nosniff        = []string{"nosniff"}
	referrerPolicy = []string{"strict-origin-when-cross-origin"}
)

// errPanic answers a request whose handler panicked; the panic itself is logged with its stack. It carries
// no cause, so that no text of the panic can turn it into another kind.
var errPanic = &models.Error{Kind: models.KindInternal, Message: "internal error"}

// newRequestID returns 16 random hexadecimal digits.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	var x [16]byte
	hex.Encode(x[:], b[:])
	return string(x[:])
}

// Middleware adds request ids, structured access logs, panic recovery and security headers to every
// request. The request's models.RequestLog carries its id and the attributes the surfaces add to its
// access log line (the identity); a panic is logged with its stack and answered by refuse (500), unless
// the answer has begun.
func Middleware(next http.Handler, refuse Refuse) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rid := r.Header.Get("X-Request-Id")
		if rid == "" || len(rid) > 100 {
			rid = newRequestID()
		}
		rl := &models.RequestLog{ID: rid}
		r = r.WithContext(models.WithRequestLog(r.Context(), rl))
		h := w.Header()
		h["X-Request-Id"] = []string{rid} // the canonical keys: Set would canonicalise them on every request
		h["X-Content-Type-Options"] = nosniff
		h["Referrer-Policy"] = referrerPolicy
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				slog.Error("panic in handler", "request_id", rid, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				if rec.status == 0 {
					refuse(rec, r, errPanic)
				}
			}
			ctx := r.Context()
			if !slog.Default().Enabled(ctx, slog.LevelInfo) {
				return
			}
			attrs := append(make([]slog.Attr, 0, 8), slog.String("request_id", rid), slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes),
				slog.Int64("duration_ms", time.Since(start).Milliseconds()))
			slog.LogAttrs(ctx, slog.LevelInfo, "http", append(attrs, rl.Attrs()...)...)
		}()
		next.ServeHTTP(rec, r)
	})
}

// HSTS adds Strict-Transport-Security to every response when the service is reached over https
// (baseURL, SERVICE_BASE_URL); otherwise it returns next unchanged.
func HSTS(baseURL string, next http.Handler) http.Handler {
	if len(baseURL) < 8 || baseURL[:8] != "https://" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
		next.ServeHTTP(w, r)
	})
}
