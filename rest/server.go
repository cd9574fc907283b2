// Package rest is the REST surface of studio: it authenticates the caller, decodes requests, calls the
// core (models.App, through its domain services) and encodes responses. It holds no business rule of its own: the
// core decides what each identity may do (models/capability.go).
package rest

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"studio/models"
	"studio/models/media"
)

// Options carries what cmd/ wires into the REST surface.
type Options struct {
	// CLIGuide is served at GET /api/cli-guide; cmd builds it from the real command tree.
	CLIGuide any
	// MediaHandler serves stored media under /media/ when the local store is used.
	MediaHandler http.Handler
	// Media is the media store (local disk or S3-compatible): uploads go into it.
	Media media.Store
	// Metrics serves /metrics (administrator key) when set; nil when metrics listen on their own address.
	Metrics http.Handler
}

// Server is the REST surface.
type Server struct {
	svc    *models.App // the core: every operation goes through its domain services
	opts   Options
	router *mux.Router
}

// maxJSONBody bounds every JSON request body.
const maxJSONBody = 1 << 20

// MaxTextBody is the longest request body a REST endpoint reads as text (a chat request): the text guard
// in front of every surface (cmd/server/httpmw) checks bodies up to it.
const MaxTextBody = maxChatBody

// New returns the REST surface; Register adds its routes to a router shared with the other surfaces.
func New(svc *models.App, opts Options) *Server {
	return &Server{svc: svc, opts: opts}
}

// Register adds every REST route to r.
func (s *Server) Register(r *mux.Router) {
	s.router = r
	api := r.PathPrefix("/api").Subrouter()
	// The chat relay is the busiest route: the router tries routes in order, one regular expression
	// each, so it comes first.
	s.registerChat(api)
	api.HandleFunc("/health", s.public(s.health)).Methods(http.MethodGet, http.MethodHead)
	api.HandleFunc("/cli-guide", s.public(s.cliGuide)).Methods(http.MethodGet)
	api.HandleFunc("/doc-contracts", s.public(s.docContracts)).Methods(http.MethodGet)
	api.HandleFunc("/openapi.json", s.public(s.openapi)).Methods(http.MethodGet)
	api.HandleFunc("/ready", s.public(s.ready)).Methods(http.MethodGet, http.MethodHead)
	api.HandleFunc("/admin", s.authed(s.admin)).Methods(http.MethodPost)
	s.registerCredits(api)
	s.registerTemplates(api)
	s.registerJobs(api)
	s.registerUploads(api)
	s.registerMedia(api)
	s.registerVideo(api)
	s.registerAuth(api)
	s.registerClaims(api)
	api.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "no such endpoint: " + r.Method + " " + r.URL.Path, Code: codeNoEndpoint})
	})
	api.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method " + r.Method + " not allowed on " + r.URL.Path, Code: codeMethodNotAllowed})
	})
	if s.opts.Metrics != nil {
		r.Handle("/metrics", s.adminOnly(s.opts.Metrics)).Methods(http.MethodGet)
	}
	if s.opts.MediaHandler != nil {
		r.PathPrefix("/media/").Handler(http.StripPrefix("/media", s.opts.MediaHandler))
	}
}

// handler is the shape of every authenticated endpoint: it returns an error instead of writing one.
type handler func(w http.ResponseWriter, r *http.Request, id *models.Identity) error

// public wraps an endpoint that needs no credential.
func (s *Server) public(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			WriteError(w, r, err)
		}
	}
}

// authed wraps an endpoint that needs a credential: 401 without a valid one. Whether this identity may
// use the operation is the core's answer (403, from the permission table in models/capability.go).
func (s *Server) authed(h handler) http.HandlerFunc {
	return s.guard(WriteError, h)
}

// guard authenticates a request, then runs h; every error is answered by fail.
func (s *Server) guard(fail func(http.ResponseWriter, *http.Request, error), h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := s.identify(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		if err := h(w, r, id); err != nil {
			fail(w, r, err)
		}
	}
}

// identify resolves the credential of either header into an Identity.
func (s *Server) identify(r *http.Request) (*models.Identity, error) {
	cred := models.CredentialFromHeader(r.Header)
	id, err := s.svc.Auth().ResolveIdentity(r.Context(), cred)
	if err != nil {
		return nil, err
	}
	id.Agent = r.Header.Get("X-CS-Agent")
	models.SetLogAttr(r.Context(), "identity", id.Owner())
	return id, nil
}

// errorBody is the error answer of every REST endpoint (except the OpenAI-style ones): the spec's
// {"error": "<message>"} with a stable machine-readable code beside it.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Codes of answers that are not core errors (the router's own refusals).
const (
	codeNoEndpoint       = "no_endpoint"
	codeMethodNotAllowed = "method_not_allowed"
)

// statusOf maps a core error kind to its HTTP status and its stable `code`: the one place where this
// happens (rest/openapi.yaml lists the codes). The code is the kind's name and never changes with the
// message, which may be reworded.
func statusOf(k models.Kind) (status int, code string) {
	switch k {
	case models.KindInvalid, models.KindNoUpstream:
		status = http.StatusBadRequest
	case models.KindUnauthenticated:
		status = http.StatusUnauthorized
	case models.KindForbidden:
		status = http.StatusForbidden
	case models.KindNotFound:
		status = http.StatusNotFound
	case models.KindConflict:
		status = http.StatusConflict
	case models.KindInsufficientCredits:
		status = http.StatusPaymentRequired
	case models.KindRateLimited:
		status = http.StatusTooManyRequests
	case models.KindTooLarge:
		status = http.StatusRequestEntityTooLarge
	case models.KindUnavailable:
		status = http.StatusServiceUnavailable
	case models.KindUnprocessable:
		status = http.StatusUnprocessableEntity
	default:
		return http.StatusInternalServerError, models.KindInternal.String()
	}
	return status, k.String()
}

// WriteError writes {"error": ..., "code": ...} with the status of the error's kind; internal causes go
// to the log only. It is the error form of every surface's shared middleware too (cmd/server/httpmw:
// the text guard, the panic guard).
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	e, status, code := answerOf(w, r, err)
	writeJSON(w, status, errorBody{Error: e.Error(), Code: code})
}

// answerOf returns the core error of err with its status and code, logs a server-side failure and sets
// Retry-After: what every error answer shares, whatever its body's shape.
func answerOf(w http.ResponseWriter, r *http.Request, err error) (e *models.Error, status int, code string) {
	if !errors.As(err, &e) {
		e = models.Internal("handler", err)
	}
	if e.Kind == models.KindInternal && models.Unreachable(e.Err) {
		e = models.Internal("handler", e.Err)
	}
	status, code = statusOf(e.Kind)
	if status >= 500 {
		cause := error(e)
		if e.Err != nil {
			cause = e.Err
		}
		slog.ErrorContext(r.Context(), "request failed", "request_id", models.RequestID(r.Context()), "path", r.URL.Path, "err", cause.Error())
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	return e, status, code
}

// writeJSON encodes v with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads a bounded JSON body into v.
func decode(r *http.Request, v any) error {
	body, err := readBody(r, maxJSONBody)
	if err != nil {
		return err
	}
	return models.DecodeJSON(body, v)
}

func readBody(r *http.Request, limit int64) ([]byte, error) {
	body, err := readAllLimited(r.Body, limit)
	if err != nil {
		return nil, err
	}
	return body, nil
}
