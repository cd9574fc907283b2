// Package web is the browser surface of studio: server-rendered pages (templ) that work without
// JavaScript. It holds no business rule: every decision is a call into the core (models).
package web

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"studio/models"
)

// Server is the browser surface.
type Server struct {
	svc *models.App
}

// New returns the browser surface over the core.
func New(svc *models.App) *Server { return &Server{svc: svc} }

// Register adds the page routes to r.
func (s *Server) Register(r *mux.Router) {
	r.HandleFunc(models.DeviceVerificationPath, s.device).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc(models.DeviceVerificationPath, s.deviceSubmit).Methods(http.MethodPost)
}

// csrfCookie names the cookie of the double-submit CSRF check: the form carries an HMAC of its value.
const csrfCookie = "studio_csrf"

// csrfToken returns the form token of the browser, setting a fresh CSRF cookie when it has none.
func (s *Server) csrfToken(w http.ResponseWriter, r *http.Request) string {
	value := ""
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		value = c.Value
	} else {
		var b [32]byte
		_, _ = rand.Read(b[:])
		value = base64.RawURLEncoding.EncodeToString(b[:])
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: value, Path: "/", HttpOnly: true,
			Secure: s.secure(), SameSite: http.SameSiteStrictMode})
	}
	return s.sign(value)
}

// checkCSRF reports whether the form's token matches the browser's CSRF cookie.
func (s *Server) checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	return models.EqualHash(r.PostFormValue("csrf"), s.sign(c.Value))
}

func (s *Server) sign(v string) string {
	return base64.RawURLEncoding.EncodeToString(models.Sign(s.svc.Secret, "csrf", []byte(v)))
}

// secure reports whether cookies must be Secure: the service is reached over https.
func (s *Server) secure() bool { return strings.HasPrefix(s.svc.Config.BaseURL, "https://") }

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
