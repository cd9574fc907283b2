// Package calls holds what the synchronous calls routed by jobs (copy, image reading, submits) and by
// jobs/relay (chat) share: who may generate, the route of chat upstreams, and how a routing refusal or
// a call that failed on every upstream becomes a core error that names no upstream.
package calls

import (
	"context"
	"errors"
	"log/slog"

	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
)

// ChatRoute routes chat calls: any chat upstream, no capability. Tenant bindings name image or video
// families and do not apply to chat.
var ChatRoute = routing.Request{Media: upstream.MediaChat}

// RouteError maps routing refusals onto core errors.
func RouteError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, routing.ErrNoUpstream):
		return models.NoUpstream(err)
	case errors.Is(err, routing.ErrUnknownModel):
		return &models.Error{Kind: models.KindInvalid, Message: "unknown model: use auto, a model family or a channel name from GET /api/available-models", Err: err}
	}
	return err
}

// RunDetail returns the log text of a routing failure, with upstream names.
func RunDetail(err error) string {
	var re *routing.RunError
	if errors.As(err, &re) {
		return re.Detail()
	}
	return err.Error()
}

// Error turns the failure of a synchronous call (chat, copy, image reading) into a core error that
// names no upstream: no capable upstream is 400 当前无可用上游, and a call that failed on every upstream
// of its chain is 503 (retry later).
func Error(ctx context.Context, err error, what string) error {
	var core *models.Error
	switch {
	case errors.As(err, &core):
		return core
	case errors.Is(err, routing.ErrNoUpstream), errors.Is(err, routing.ErrUnknownModel):
		return RouteError(err)
	}
	slog.WarnContext(ctx, what+" failed", "detail", RunDetail(err))
	msg := what + " failed on every upstream channel; retry later"
	var re *routing.RunError
	if errors.As(err, &re) {
		switch {
		case errors.Is(re.Cause, context.DeadlineExceeded):
			msg = what + " timed out; retry later"
		case re.Cause != nil:
			msg = what + " was cancelled"
		}
	}
	return &models.Error{Kind: models.KindUnavailable, Message: msg, Err: err}
}
