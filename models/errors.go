package models

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind classifies a core error so that every surface maps it in one place.
type Kind int

// The kinds of core errors.
const (
	KindInternal Kind = iota
	KindInvalid
	KindUnauthenticated
	KindForbidden
	KindNotFound
	KindConflict
	KindInsufficientCredits
	KindRateLimited
	KindNoUpstream
	KindTooLarge
	KindUnavailable
	KindUnprocessable
)

// String names the kind: in logs, and as the stable `code` of REST error answers.
func (k Kind) String() string {
	switch k {
	case KindInvalid:
		return "invalid"
	case KindUnauthenticated:
		return "unauthenticated"
	case KindForbidden:
		return "forbidden"
	case KindNotFound:
		return "not_found"
	case KindConflict:
		return "conflict"
	case KindInsufficientCredits:
		return "insufficient_credits"
	case KindRateLimited:
		return "rate_limited"
	case KindNoUpstream:
		return "no_upstream"
	case KindTooLarge:
		return "too_large"
	case KindUnavailable:
		return "unavailable"
	case KindUnprocessable:
		return "unprocessable"
	}
	return "internal"
}

// Error is the core's error: a public-safe message plus the raw cause for logs only.
type Error struct {
	Kind       Kind
	Message    string
	RetryAfter time.Duration
	Err        error
	// Param names the request field at fault, when one is (OpenAI-shaped answers carry it as `param`).
	Param string
	// Reason is a finer machine-readable reason where a client library expects one (OpenAI's
	// `model_not_found`); empty means the kind's code.
	Reason string
}

// ReasonModelNotFound is the reason of a refused model name, as OpenAI names it.
const ReasonModelNotFound = "model_not_found"

// InvalidParam returns a KindInvalid error about one request field, with an optional finer reason.
func InvalidParam(param, reason, format string, a ...any) *Error {
	return &Error{Kind: KindInvalid, Message: fmt.Sprintf(format, a...), Param: param, Reason: reason}
}

// Error returns the public message.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Kind.String()
	}
	return e.Message
}

// Unwrap returns the raw cause.
func (e *Error) Unwrap() error { return e.Err }

// NoUpstreamMessage is the fixed message of the no-capable-upstream refusal.
const NoUpstreamMessage = "当前无可用上游"

// Invalid returns a KindInvalid error with a formatted message.
func Invalid(format string, a ...any) *Error {
	return &Error{Kind: KindInvalid, Message: fmt.Sprintf(format, a...)}
}

// NotFound returns a KindNotFound error naming the missing thing.
func NotFound(what string) *Error {
	return &Error{Kind: KindNotFound, Message: what + " not found"}
}

// Forbidden returns a KindForbidden error with a message.
func Forbidden(msg string) *Error { return &Error{Kind: KindForbidden, Message: msg} }

// Unauthenticated returns a KindUnauthenticated error with a message.
func Unauthenticated(msg string) *Error { return &Error{Kind: KindUnauthenticated, Message: msg} }

// Conflict returns a KindConflict error with a message.
func Conflict(msg string) *Error { return &Error{Kind: KindConflict, Message: msg} }

// NoUpstream returns the refusal for a request no upstream can serve.
func NoUpstream(cause error) *Error {
	return &Error{Kind: KindNoUpstream, Message: NoUpstreamMessage, Err: cause}
}

// Internal wraps an unexpected error; its message is never shown to clients. A cause that says the
// database is unreachable or restarting becomes KindUnavailable, which clients see as temporary.
func Internal(op string, err error) *Error {
	if Unreachable(err) {
		return &Error{Kind: KindUnavailable, Message: "service temporarily unavailable: the database is not answering; retry shortly",
			Err: fmt.Errorf("%s: %w", op, err)}
	}
	return &Error{Kind: KindInternal, Message: "internal error", Err: fmt.Errorf("%s: %w", op, err)}
}

// Unreachable reports whether err (or its causes) says the database cannot be reached right now.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var msgs []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, " | ")
	for _, s := range []string{"connection refused", "bad connection", "the database system is", "conn closed", "connection reset",
		"unexpected EOF", "broken pipe", "failed to connect", "terminating connection", "server closed the connection",
		"database is closed", "i/o timeout"} {
		if strings.Contains(all, s) {
			return true
		}
	}
	return false
}

// KindOf returns the kind of err, KindInternal for errors of other types.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
