package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"studio/models"
)

// codeOf maps a core error kind to its GraphQL extension code: the one place where this happens.
func codeOf(k models.Kind) string {
	switch k {
	case models.KindInvalid:
		return "BAD_USER_INPUT"
	case models.KindUnauthenticated:
		return "UNAUTHENTICATED"
	case models.KindForbidden:
		return "FORBIDDEN"
	case models.KindNotFound:
		return "NOT_FOUND"
	case models.KindConflict:
		return "CONFLICT"
	case models.KindInsufficientCredits:
		return "INSUFFICIENT_CREDITS"
	case models.KindRateLimited:
		return "RATE_LIMITED"
	case models.KindNoUpstream:
		return "NO_UPSTREAM"
	case models.KindTooLarge:
		return "PAYLOAD_TOO_LARGE"
	case models.KindUnavailable:
		return "UNAVAILABLE"
	case models.KindUnprocessable:
		return "UNPROCESSABLE"
	}
	return "INTERNAL"
}

// presentError turns an error into the GraphQL error sent to the client. Core errors keep their public
// message and get the code of their kind (and retryAfter, in seconds, when rate limited); internal causes
// go to the log only. Errors of the GraphQL layer itself (parsing, validation, limits, argument coercion)
// keep their message and code, BAD_USER_INPUT when they have none.
func presentError(ctx context.Context, err error) *gqlerror.Error {
	gqlErr := graphql.DefaultErrorPresenter(ctx, err)
	var e *models.Error
	if errors.As(err, &e) {
		gqlErr.Message = e.Error()
		if e.Kind == models.KindInternal {
			gqlErr.Message = "internal error"
			slog.ErrorContext(ctx, "graphql: operation failed", "path", gqlErr.Path.String(), "err", err)
		}
		if gqlErr.Extensions == nil {
			gqlErr.Extensions = map[string]any{}
		}
		gqlErr.Extensions["code"] = codeOf(e.Kind)
		if e.RetryAfter > 0 {
			gqlErr.Extensions["retryAfter"] = int((e.RetryAfter + 999_999_999) / 1_000_000_000)
		}
		return gqlErr
	}
	if _, ok := gqlErr.Extensions["code"]; !ok {
		if gqlErr.Extensions == nil {
			gqlErr.Extensions = map[string]any{}
		}
		gqlErr.Extensions["code"] = "BAD_USER_INPUT"
	}
	return gqlErr
}

// recoverPanic logs a panic of a resolver and answers it as an internal error.
func recoverPanic(ctx context.Context, p any) error {
	slog.ErrorContext(ctx, "graphql: panic in resolver", "panic", p, "stack", string(debug.Stack()))
	return models.Internal("graphql", fmt.Errorf("panic: %v", p))
}
