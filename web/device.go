package web

import (
	"net"
	"net/http"
	"net/url"

	"studio/models"
)

// devicePage is what the device approval page shows.
type devicePage struct {
	UserCode   string
	CSRF       string // the form's token (formGuard: bound to the pre-session cookie)
	SignedInAs string // e-mail of the browser session's account; empty when not signed in
	OIDCURL    string // third-party sign-in link; empty when not configured
	SignInURL  string // the console sign-in page, returning here (with the user code) afterwards
	CodeURL    string // the sign-in-by-code page (no password yet, or a forgotten one), returning here
	Error      string
	Done       string // "approved" or "denied" once decided
	L          lang   // the page's language (pageLang: a personal account's page)
}

// device shows the approval form for the user code of ?user_code=.
func (s *Server) device(w http.ResponseWriter, r *http.Request) {
	p := s.devicePage(w, r, r.URL.Query().Get("user_code"))
	status := http.StatusOK
	if p.UserCode != "" {
		if _, err := s.svc.Auth().PendingDevice(r.Context(), p.UserCode); err != nil {
			status, p.Error = errorMessage(r, err)
		}
	}
	s.render(w, r, status, p)
}

// deviceSubmit signs the person in (session cookie, or e-mail and password) and approves or denies the code.
func (s *Server) deviceSubmit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.render(w, r, http.StatusBadRequest, s.devicePage(w, r, "", "The form could not be read. Reload the page and try again."))
		return
	}
	p := s.devicePage(w, r, r.PostFormValue("user_code"))
	if s.forms.check(r, nil) != nil {
		p.Error = formExpiredText
		s.render(w, r, http.StatusForbidden, p)
		return
	}
	approve := r.PostFormValue("action") == "approve"
	userID := ""
	if u := s.sessionUser(r); u != nil {
		userID = u.ID
	} else if approve {
		u, err := s.svc.Auth().Authenticate(r.Context(), r.PostFormValue("email"), r.PostFormValue("password"), clientAddr(r))
		if err != nil {
			status, msg := errorMessage(r, err)
			p.Error = msg
			s.render(w, r, status, p)
			return
		}
		userID = u.ID
	}
	if err := s.svc.Auth().DecideDevice(r.Context(), p.UserCode, userID, approve); err != nil {
		status, msg := errorMessage(r, err)
		p.Error = msg
		s.render(w, r, status, p)
		return
	}
	p.Done = "denied"
	if approve {
		p.Done = "approved"
	}
	s.render(w, r, http.StatusOK, p)
}

// devicePage fills the page for a user code; an optional message becomes its error.
func (s *Server) devicePage(w http.ResponseWriter, r *http.Request, userCode string, msg ...string) devicePage {
	p := devicePage{UserCode: models.NormalizeUserCode(userCode), CSRF: s.forms.token(w, r, nil), L: pageLang(r, true)}
	if len(msg) > 0 {
		p.Error = msg[0]
	}
	if u := s.sessionUser(r); u != nil {
		p.SignedInAs = u.Email
		return p
	}
	back := models.DeviceVerificationPath
	if p.UserCode != "" {
		back += "?user_code=" + url.QueryEscape(p.UserCode)
	}
	p.SignInURL = "/login?next=" + url.QueryEscape(back)
	p.CodeURL = codeLink(back)
	if s.svc.Auth().OIDCEnabled() {
		p.OIDCURL = "/api/auth/oidc/start?return=" + url.QueryEscape(back)
	}
	return p
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, p devicePage) {
	pageHeaders(w)
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_ = deviceView(p).Render(r.Context(), w)
}

// clientAddr is the caller's network address, the subject of per-address limits.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
