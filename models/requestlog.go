package models

import (
	"context"
	"log/slog"
)

// RequestLog is what the HTTP middleware (cmd/server/httpmw) keeps about one request for its access log
// line: the request id and the attributes the surfaces add while they serve it (the caller's identity).
// It lives here, in the core every surface imports, so that the surfaces read and add to it without
// importing the wiring.
type RequestLog struct {
	ID    string
	attrs []slog.Attr
}

type requestLogKey struct{}

// WithRequestLog returns ctx carrying l.
func WithRequestLog(ctx context.Context, l *RequestLog) context.Context {
	return context.WithValue(ctx, requestLogKey{}, l)
}

// RequestLogOf returns the request log of ctx, nil outside an HTTP request.
func RequestLogOf(ctx context.Context) *RequestLog {
	l, _ := ctx.Value(requestLogKey{}).(*RequestLog)
	return l
}

// RequestID returns the id of the HTTP request of ctx (its X-Request-ID), "" outside one.
func RequestID(ctx context.Context) string {
	if l := RequestLogOf(ctx); l != nil {
		return l.ID
	}
	return ""
}

// SetLogAttr adds k=v to the access log line of the HTTP request of ctx (nothing outside one).
func SetLogAttr(ctx context.Context, k, v string) {
	if l := RequestLogOf(ctx); l != nil {
		l.attrs = append(l.attrs, slog.String(k, v))
	}
}

// Attrs returns the attributes added by SetLogAttr, in order.
func (l *RequestLog) Attrs() []slog.Attr { return l.attrs }
