package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class sorts upstream failures by what routing should do about them (decision D5).
type Class string

// The failure classes.
const (
	// ClassNone is the class of a success.
	ClassNone Class = ""
	// ClassTransient is a time-out, a rate limit or HTTP 408: the same upstream may be retried.
	ClassTransient Class = "transient"
	// ClassRevoked is HTTP 401 or 403: the key is revoked and the upstream leaves rotation.
	ClassRevoked Class = "revoked"
	// ClassUnpaid is HTTP 402 or 429 insufficient_quota: the upstream leaves rotation.
	ClassUnpaid Class = "unpaid"
	// ClassCapability means the upstream cannot do what was asked: the next upstream is tried.
	ClassCapability Class = "capability"
	// ClassOther is any other failure: the next upstream is tried at once.
	ClassOther Class = "other"
	// ClassRefused is a refusal of the content (moderation of the prompt, a reference or the result):
	// the job fails with its refund at once, without a retry or another upstream, and the upstream's
	// health is not blamed.
	ClassRefused Class = "refused"
)

// RefusedMessage is the tenant-safe text of a content refusal.
const RefusedMessage = "the prompt or a reference was refused by content moderation; credits refunded. Change the prompt or references before resubmitting"

// Error is a classified failure of one upstream call; its text is for logs only.
type Error struct {
	Class    Class
	Upstream string // channel name
	Status   int    // HTTP status, 0 when none
	Code     string // upstream error code such as rate_limit_exceeded
	Message  string // upstream or local detail; may name the provider
	Err      error  // underlying error, if any
	// RetryAfter is the delay the upstream asked for (HTTP Retry-After), 0 when none.
	RetryAfter time.Duration
}

// Error returns the detailed text meant for logs, never for tenants.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("upstream")
	if e.Upstream != "" {
		b.WriteString(" " + e.Upstream)
	}
	b.WriteString(": " + string(e.Class))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d", e.Status)
		if e.Code != "" {
			b.WriteString(", " + e.Code)
		}
		b.WriteString(")")
	} else if e.Code != "" {
		b.WriteString(" (" + e.Code + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// SafeMessage returns a generic text that may be shown to tenants.
func (e *Error) SafeMessage() string {
	return SafeMessage(e.Class)
}

// SafeMessage returns the tenant-safe text of a failure class.
func SafeMessage(c Class) string {
	switch c {
	case ClassTransient:
		return "the upstream channel timed out or is busy"
	case ClassRevoked, ClassUnpaid:
		return "the upstream channel is unavailable"
	case ClassCapability:
		return "the upstream channel does not support this request"
	case ClassRefused:
		return RefusedMessage
	default:
		return "the upstream channel failed"
	}
}

// ClassOf returns the class of err: the class of an *Error inside it, transient for time-outs,
// and other for anything else; nil is ClassNone.
func ClassOf(err error) Class {
	if err == nil {
		return ClassNone
	}
	var ue *Error
	if errors.As(err, &ue) {
		return ue.Class
	}
	if isTimeout(err) {
		return ClassTransient
	}
	return ClassOther
}

// isTimeout reports whether err is a connect or read time-out.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errorBody is the OpenAI error envelope.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
		Param   string `json:"param"`
	} `json:"error"`
}

// ClassifyHTTP classifies a non-2xx HTTP answer from its status and OpenAI error body.
func ClassifyHTTP(name string, status int, body []byte) *Error {
	e := &Error{Upstream: name, Status: status, Class: ClassOther}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil {
		e.Message = eb.Error.Message
		switch c := eb.Error.Code.(type) {
		case string:
			e.Code = c
		case float64:
			e.Code = fmt.Sprint(c)
		}
		if e.Code == "" {
			e.Code = eb.Error.Type
		}
	} else if len(body) > 0 {
		e.Message = truncate(string(body), 200)
	}
	reason := strings.ToLower(e.Code + " " + eb.Error.Type)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Class = ClassRevoked
	case status == http.StatusPaymentRequired:
		e.Class = ClassUnpaid
	case status == http.StatusTooManyRequests:
		if strings.Contains(reason, "insufficient_quota") {
			e.Class = ClassUnpaid
		} else {
			e.Class = ClassTransient
		}
	case status == http.StatusRequestTimeout:
		e.Class = ClassTransient
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		e.Class = ClassCapability
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		if isCapabilityReason(reason + " " + strings.ToLower(e.Message)) {
			e.Class = ClassCapability
		}
	}
	return e
}

// isCapabilityReason reports whether an error code or message says a feature is unsupported.
func isCapabilityReason(s string) bool {
	for _, w := range []string{"unsupported", "not supported", "not_supported", "model_not_found", "does not support"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// truncate shortens s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// StatusClass is the class of a non-2xx HTTP status for the task protocols (jobs/upstream/<name>):
// 401 and 403 revoked, 402 unpaid, 408, 429 and every 5xx transient (retried on the same upstream at
// most twice), 404, 405 and 501 capability, anything else other. A protocol refines it from its own
// error codes (an exhausted balance, a quota, a moderation refusal).
func StatusClass(status int) Class {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ClassRevoked
	case status == http.StatusPaymentRequired:
		return ClassUnpaid
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return ClassTransient
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		return ClassCapability
	}
	return ClassOther
}

// RetryAfter reads an HTTP Retry-After header (seconds or an HTTP date); 0 when absent or unreadable.
func RetryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
