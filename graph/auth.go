package graph

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql/handler/transport"

	"studio/models"
)

// credentials are the credential of one HTTP request or WebSocket connection. Over HTTP it is resolved
// into an identity once, on first use, and shared by every field of the operation. Over WebSocket it is
// resolved again for every operation, so that a key that was replaced or disabled stops working for new
// operations at once, as it does over REST (subscriptions already open run to their end).
type credentials struct {
	key          string
	agent        string
	perOperation bool

	once sync.Once
	id   *models.Identity
	err  error
}

type credentialsKey struct{}

// withCredentials stores the caller's credentials in the context.
func withCredentials(ctx context.Context, c *credentials) context.Context {
	return context.WithValue(ctx, credentialsKey{}, c)
}

// credentialsFromHeaders reads X-API-Key or Authorization: Bearer with the parser of every surface.
func credentialsFromHeaders(h http.Header) *credentials {
	return &credentials{key: models.CredentialFromHeader(h), agent: h.Get("X-CS-Agent")}
}

// resolve turns the credentials into an identity (once, unless perOperation).
func (c *credentials) resolve(ctx context.Context, app *models.App) (*models.Identity, error) {
	lookup := func() (*models.Identity, error) {
		id, err := app.Auth().ResolveIdentity(ctx, c.key)
		if id != nil {
			id.Agent = c.agent
		}
		return id, err
	}
	if c.perOperation {
		return lookup()
	}
	c.once.Do(func() { c.id, c.err = lookup() })
	return c.id, c.err
}

// caller authenticates the operation: a missing or invalid credential is UNAUTHENTICATED, as REST answers
// 401. Whether the identity may use the field is the core's answer (FORBIDDEN, from the permission table
// in models/capability.go).
func (r *Resolver) caller(ctx context.Context) (*models.Identity, error) {
	c, _ := ctx.Value(credentialsKey{}).(*credentials)
	if c == nil {
		c = &credentials{}
	}
	id, err := c.resolve(ctx, r.svc)
	if models.KindOf(err) == models.KindUnauthenticated {
		if st, ok := ctx.Value(httpStatusKey{}).(*httpStatus); ok {
			st.unauthenticated.Store(true)
		}
	}
	return id, err
}

// httpStatus is what an HTTP request's execution tells its answer's status: a field that needed the
// caller met a missing or invalid credential, so the answer is 401 (spec section 5), as REST answers,
// with the GraphQL body that says which fields (UNAUTHENTICATED). An operation that needs no caller
// (introspection) is answered 200 without a credential.
type httpStatus struct{ unauthenticated atomic.Bool }

type httpStatusKey struct{}

// statusWriter turns the 200 of an operation that met a missing or invalid credential into 401.
type statusWriter struct {
	http.ResponseWriter
	st    *httpStatus
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote && code == http.StatusOK && w.st.unauthenticated.Load() {
		code = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Bearer realm="studio"`)
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withHTTPStatus prepares an HTTP request's answer to carry 401 when its operation met a missing or
// invalid credential.
func withHTTPStatus(w http.ResponseWriter, req *http.Request) (http.ResponseWriter, *http.Request) {
	st := &httpStatus{}
	return &statusWriter{ResponseWriter: w, st: st}, req.WithContext(context.WithValue(req.Context(), httpStatusKey{}, st))
}

// WebSocket close codes of graphql-transport-ws for a refused connection_init.
const (
	closeUnauthorized = 4401
	closeForbidden    = 4403
	// closeInternalError is RFC 6455's "internal error": the credential could not be checked.
	closeInternalError = 1011
)

// connection is the state of one WebSocket connection.
type connection struct {
	subscriptions atomic.Int32
}

type connectionKey struct{}

// initConnection authenticates a WebSocket connection from its connection_init payload ({"X-API-Key": ...},
// {"Authorization": "Bearer ..."} or {"apiKey": ...}), or else from the upgrade request's headers. A
// missing or invalid credential closes the connection with 4401, an identity that has nothing to follow
// (the administrator key) with 4403; the legacy graphql-ws protocol first gets a connection_error message.
func (r *Resolver) initConnection(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	c, _ := ctx.Value(credentialsKey{}).(*credentials)
	sent := http.Header{"X-Api-Key": {firstString(payload, "X-API-Key", "x-api-key", "apiKey", "api_key")}, "Authorization": {payload.Authorization()}}
	if key := models.CredentialFromHeader(sent); key != "" {
		c = &credentials{key: key, agent: firstString(payload, "X-CS-Agent", "x-cs-agent")}
	}
	if c == nil {
		c = &credentials{}
	}
	id, err := c.resolve(ctx, r.svc)
	if err != nil {
		var e *models.Error
		if errors.As(err, &e) && e.Kind == models.KindUnauthenticated {
			return refuse(ctx, closeUnauthorized, "Unauthorized"), nil, err
		}
		slog.ErrorContext(ctx, "graphql: authenticate WebSocket connection", "err", err)
		return refuse(ctx, closeInternalError, "internal error"), nil, errors.New("internal error")
	}
	// Subscriptions follow jobs and video tasks: an identity with nothing to follow has its connection
	// refused at once (graphql-transport-ws close code 4403).
	if err := r.svc.Jobs().MayFollow(id); err != nil {
		return refuse(ctx, closeForbidden, "Forbidden"), nil, err
	}
	ctx = withCredentials(ctx, &credentials{key: c.key, agent: c.agent, perOperation: true})
	return context.WithValue(ctx, connectionKey{}, &connection{}), nil, nil
}

func refuse(ctx context.Context, code int, reason string) context.Context {
	return transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, code), reason)
}

func firstString(p transport.InitPayload, keys ...string) string {
	for _, k := range keys {
		if v := p.GetString(k); v != "" {
			return v
		}
	}
	return ""
}

// holdSubscription counts one more subscription on the WebSocket connection of ctx until ctx ends; over
// the bound it is refused.
func (r *Resolver) holdSubscription(ctx context.Context) error {
	conn, _ := ctx.Value(connectionKey{}).(*connection)
	if conn == nil {
		return nil
	}
	if conn.subscriptions.Add(1) > int32(r.maxSubscriptions) {
		conn.subscriptions.Add(-1)
		return &models.Error{Kind: models.KindRateLimited,
			Message: "too many subscriptions on this connection (at most " + strconv.Itoa(r.maxSubscriptions) + "); complete some or open another connection"}
	}
	context.AfterFunc(ctx, func() { conn.subscriptions.Add(-1) })
	return nil
}
