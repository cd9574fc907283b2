// Package web is the browser surface of studio: server-rendered pages (templ) that work without
// JavaScript. It holds no business rule: every decision is a call into the core (models).
package web

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"

	"studio/models"
)

// Server is the browser surface.
type Server struct {
	svc   *models.App
	forms *formGuard // the token and cross-site check of its form (web/forms.go)
}

// New returns the browser surface over the core.
func New(svc *models.App) *Server { return &Server{svc: svc, forms: newFormGuard(svc)} }

// Register adds the page routes to r.
func (s *Server) Register(r *mux.Router) {
	r.HandleFunc(models.DeviceVerificationPath, s.device).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc(models.DeviceVerificationPath, s.deviceSubmit).Methods(http.MethodPost)
}

// sessionUser returns the personal account of the browser's session cookie, or nil.
func (s *Server) sessionUser(r *http.Request) *models.User {
	c, err := r.Cookie(models.SessionCookie)
	if err != nil {
		return nil
	}
	u, err := s.svc.Auth().SessionUser(r.Context(), c.Value)
	if err != nil {
		return nil
	}
	return u
}

// pageHeaders forbid framing (an approval page must not be clickjacked), caching and foreign resources;
// the page uses the console's layout, stylesheet (/static/style.css) and icon, and no script.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

// errorMessage maps a core error to the status and sentence a page shows: the one place this happens.
func errorMessage(r *http.Request, err error) (int, string) {
	var e *models.Error
	if !errors.As(err, &e) || e.Kind == models.KindInternal {
		slog.ErrorContext(r.Context(), "page failed", "path", r.URL.Path, "err", err)
		return http.StatusInternalServerError, "Something went wrong on our side. Try again in a moment."
	}
	switch e.Kind {
	case models.KindInvalid:
		return http.StatusBadRequest, e.Error()
	case models.KindUnauthenticated:
		return http.StatusUnauthorized, e.Error()
	case models.KindForbidden:
		return http.StatusForbidden, e.Error()
	case models.KindNotFound:
		return http.StatusNotFound, "Unknown code: check the code shown in your terminal."
	case models.KindConflict:
		return http.StatusConflict, e.Error()
	case models.KindRateLimited:
		return http.StatusTooManyRequests, "Too many attempts. Wait a while and try again."
	}
	return http.StatusServiceUnavailable, e.Error()
}
