package rest

import (
	"mime"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"studio/models"
)

// deviceGrantType is the grant_type of RFC 8628 section 3.4.
const deviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

// registerAuth adds the routes of registration, login and device authorization.
func (s *Server) registerAuth(api *mux.Router) {
	api.HandleFunc("/auth/register/code", s.public(s.registerCode)).Methods(http.MethodPost)
	api.HandleFunc("/auth/register", s.public(s.register)).Methods(http.MethodPost)
	api.HandleFunc("/auth/login", s.public(s.login)).Methods(http.MethodPost)
	api.HandleFunc("/auth/password", s.authed(s.changePassword)).Methods(http.MethodPost)
	api.HandleFunc("/whoami", s.authed(s.whoami)).Methods(http.MethodGet)
	api.HandleFunc("/auth/oidc/start", s.public(s.oidcStart)).Methods(http.MethodGet)
	api.HandleFunc("/auth/oidc/callback", s.public(s.oidcCallback)).Methods(http.MethodGet)
	api.HandleFunc("/auth/device", s.public(s.deviceStart)).Methods(http.MethodPost)
	api.HandleFunc("/auth/device/token", s.public(s.deviceToken)).Methods(http.MethodPost)
}

// clientAddr is the caller's network address, the subject of per-address limits (models.AddressKey).
func clientAddr(r *http.Request) string { return models.AddressKey(r.RemoteAddr) }

// writeNoStore writes a JSON answer that carries a credential: never cached (RFC 6749 section 5.1).
func writeNoStore(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, status, v)
}

func (s *Server) registerCode(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Email string `json:"email"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := s.svc.Auth().SendRegistrationCode(r.Context(), in.Email, clientAddr(r)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "expires_in": int(models.EmailCodeTTL.Seconds())})
	return nil
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) error {
	var in models.RegisterInput
	if err := decode(r, &in); err != nil {
		return err
	}
	res, err := s.svc.Auth().Register(r.Context(), in, clientAddr(r))
	if err != nil {
		return err
	}
	writeNoStore(w, http.StatusOK, withOK{res})
	return nil
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	res, err := s.svc.Auth().Login(r.Context(), in.Email, in.Password, clientAddr(r))
	if err != nil {
		return err
	}
	writeNoStore(w, http.StatusOK, withOK{res})
	return nil
}

func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var in struct {
		OldPassword string `json:"old_password"`
		NewPassword string `json:"new_password"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := s.svc.Auth().ChangePassword(r.Context(), id, in.OldPassword, in.NewPassword); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	return nil
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	v, err := s.svc.Auth().Whoami(r.Context(), id)
	if err != nil {
		return err
	}
	writeOK(w, v)
	return nil
}

// secureCookies reports whether cookies must be Secure: the service is reached over https.
func (s *Server) secureCookies() bool { return strings.HasPrefix(s.svc.Config.BaseURL, "https://") }

// oidcStart redirects the browser to the OpenID provider, with state, nonce and PKCE verifier in a signed cookie.
func (s *Server) oidcStart(w http.ResponseWriter, r *http.Request) error {
	target, cookie, err := s.svc.Auth().OIDCStart(r.Context(), r.URL.Query().Get("return"))
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: models.OIDCCookie, Value: cookie, Path: "/api/auth/oidc", HttpOnly: true,
		Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode, MaxAge: int(models.OIDCFlowTTL.Seconds())})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusFound)
	return nil
}

// oidcCallback finishes third-party sign-in: JSON login answer, or a session cookie and a redirect to
// the local page the flow was started for.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	http.SetCookie(w, &http.Cookie{Name: models.OIDCCookie, Value: "", Path: "/api/auth/oidc", HttpOnly: true,
		Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode, MaxAge: -1})
	if e := q.Get("error"); e != "" {
		return models.Unauthenticated("the sign-in provider answered " + e + ": sign-in was not completed")
	}
	var cookie string
	if c, err := r.Cookie(models.OIDCCookie); err == nil {
		cookie = c.Value
	}
	res, err := s.svc.Auth().OIDCCallback(r.Context(), cookie, q.Get("state"), q.Get("code"))
	if err != nil {
		return err
	}
	if res.Return == "" {
		writeNoStore(w, http.StatusOK, withOK{res.Login})
		return nil
	}
	session, err := s.svc.Auth().StartUserSession(r.Context(), res.User.ID)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: models.SessionCookie, Value: session, Path: "/", HttpOnly: true,
		Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode, MaxAge: int(models.SessionTTL.Seconds())})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, res.Return, http.StatusSeeOther)
	return nil
}

func (s *Server) deviceStart(w http.ResponseWriter, r *http.Request) error {
	res, err := s.svc.Auth().StartDeviceAuthorization(r.Context(), clientAddr(r))
	if err != nil {
		return err
	}
	writeNoStore(w, http.StatusOK, res)
	return nil
}

// deviceToken answers a device's poll; the body is JSON {device_code} or, per RFC 8628, form-encoded
// grant_type=urn:ietf:params:oauth:grant-type:device_code&device_code=...
func (s *Server) deviceToken(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		GrantType  string `json:"grant_type"`
		DeviceCode string `json:"device_code"`
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
		r.Body = http.MaxBytesReader(w, r.Body, maxJSONBody)
		if err := r.ParseForm(); err != nil {
			return models.Invalid("invalid form body: %v", err)
		}
		in.GrantType, in.DeviceCode = r.PostForm.Get("grant_type"), r.PostForm.Get("device_code")
	} else if err := decode(r, &in); err != nil {
		return err
	}
	if in.GrantType != "" && in.GrantType != deviceGrantType {
		return models.Invalid("unsupported_grant_type")
	}
	tok, err := s.svc.Auth().PollDeviceToken(r.Context(), in.DeviceCode)
	if err != nil {
		w.Header().Set("Cache-Control", "no-store")
		return err
	}
	writeNoStore(w, http.StatusOK, tok)
	return nil
}
