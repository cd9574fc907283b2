package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"studio/models"
)

// Sign-in and sign-out. The sign-in forms are guarded like every form (formGuard, web/forms.go: their
// token is bound to the pre-session cookie), so that another site cannot post them in the browser's
// name and sign it into the wrong account. A successful sign-in stores a server-side session
// (models.StartKeySession, StartPasswordSession) and sets its cookie: HttpOnly, SameSite=Lax, Secure when SERVICE_BASE_URL is https, valid for
// models.SessionTTL from sign-in (fixed, not sliding).

// signInView is what the sign-in page shows.
type signInView struct {
	Chrome    chrome
	FormToken string
	Next      string
	Error     string
	Email     string
	Method    string // the form that failed: "key" or "password"
}

// signInPage shows the sign-in forms; a browser that is signed in already goes to its start page.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.headers(w)
	if sess, err := c.session(r); err == nil {
		http.Redirect(w, r, returnPath(r.URL.Query().Get("next"), &sess.Identity), http.StatusSeeOther)
		return
	}
	p := c.signInForm(w, r, r.URL.Query().Get("next"))
	if r.URL.Query().Get("signed_out") == "1" {
		p.Chrome.Notice = "You have signed out."
	}
	c.render(w, r, http.StatusOK, signInPage(p))
}

// signIn checks the form token and signs in with a key (or login token) or with e-mail and password.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	c.headers(w)
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		c.render(w, r, http.StatusBadRequest, signInPage(c.signInForm(w, r, "", "The form could not be read. Reload the page and try again.")))
		return
	}
	p := c.signInForm(w, r, r.PostFormValue("next"))
	p.Method, p.Email = r.PostFormValue("method"), strings.TrimSpace(r.PostFormValue("email"))
	if c.forms.check(r, nil) != nil {
		p.Error = formExpiredText
		c.render(w, r, http.StatusForbidden, signInPage(p))
		return
	}
	var (
		cookie string
		err    error
	)
	switch p.Method {
	case "password":
		cookie, err = c.svc.Auth().StartPasswordSession(r.Context(), p.Email, r.PostFormValue("password"), clientAddress(r))
	default:
		p.Method = "key"
		cookie, err = c.svc.Auth().StartKeySession(r.Context(), r.PostFormValue("key"), clientAddress(r))
	}
	if err != nil {
		status, msg := pageError(r, err)
		p.Error = msg
		c.render(w, r, status, signInPage(p))
		return
	}
	c.setSessionCookie(w, cookie)
	target := consolePrefix
	if sess, err := c.svc.Auth().ResolveSession(r.Context(), cookie); err == nil {
		target = returnPath(p.Next, &sess.Identity)
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// setSessionCookie gives the browser the cookie of a new session.
func (c *Console) setSessionCookie(w http.ResponseWriter, cookie string) {
	http.SetCookie(w, &http.Cookie{Name: models.SessionCookie, Value: cookie, Path: "/", HttpOnly: true, Secure: c.secure(),
		SameSite: http.SameSiteLaxMode, MaxAge: int(models.SessionTTL / time.Second)})
}

// signInCodeView is the page that signs a personal account in with a code e-mailed to it, setting a
// new password on the way.
type signInCodeView struct {
	Chrome    chrome
	FormToken string
	Next      string
	Email     string
	Error     string
	Sent      bool // a code was asked for: the page asks for it and the new password
}

// signInCodePage asks for the e-mail address to send a sign-in code to.
func (c *Console) signInCodePage(w http.ResponseWriter, r *http.Request) {
	c.headers(w)
	f := c.signInForm(w, r, r.URL.Query().Get("next"))
	p := signInCodeView{Chrome: c.publicChrome(r, "Sign in with an e-mailed code", true), FormToken: f.FormToken, Next: f.Next}
	c.render(w, r, http.StatusOK, signInCodePage(p))
}

// signInCode e-mails a code (models SendSignInCode), or checks it and sets the new password (models
// ResetPassword), then opens a session and returns where the sign-in started (next).
func (c *Console) signInCode(w http.ResponseWriter, r *http.Request) {
	c.headers(w)
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		f := c.signInForm(w, r, "", "The form could not be read. Reload the page and try again.")
		c.render(w, r, http.StatusBadRequest, signInCodePage(signInCodeView{Chrome: f.Chrome, FormToken: f.FormToken, Error: f.Error}))
		return
	}
	f := c.signInForm(w, r, r.PostFormValue("next"))
	p := signInCodeView{Chrome: c.publicChrome(r, "Sign in with an e-mailed code", true), FormToken: f.FormToken, Next: f.Next,
		Email: strings.TrimSpace(r.PostFormValue("email"))}
	fail := func(status int, msg string) {
		p.Error = msg
		c.render(w, r, status, signInCodePage(p))
	}
	if c.forms.check(r, nil) != nil {
		fail(http.StatusForbidden, formExpiredText)
		return
	}
	if r.PostFormValue("step") != "reset" {
		if err := c.svc.Auth().SendSignInCode(r.Context(), p.Email, clientAddress(r)); err != nil {
			fail(pageError(r, err))
			return
		}
		p.Sent = true
		p.Chrome.Notice = fmt.Sprintf("If an account uses %s, a six-digit code is on its way to it. It is valid for %d minutes.",
			p.Email, int(models.EmailCodeTTL.Minutes()))
		c.render(w, r, http.StatusOK, signInCodePage(p))
		return
	}
	p.Sent = true
	if r.PostFormValue("password") != r.PostFormValue("password_confirm") {
		fail(http.StatusBadRequest, "The two passwords differ. Type the new password twice.")
		return
	}
	u, err := c.svc.Auth().ResetPassword(r.Context(), p.Email, r.PostFormValue("code"), r.PostFormValue("password"), clientAddress(r))
	if err != nil {
		fail(pageError(r, err))
		return
	}
	cookie, err := c.svc.Auth().StartUserSession(r.Context(), u.ID)
	if err != nil {
		fail(pageError(r, err))
		return
	}
	c.setSessionCookie(w, cookie)
	http.Redirect(w, r, returnPath(p.Next, &models.Identity{Kind: models.IdentityUser, UserID: u.ID}), http.StatusSeeOther)
}

// signOut ends the session and clears its cookie.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request, _ *visit) error {
	if ck, err := r.Cookie(models.SessionCookie); err == nil {
		if err := c.svc.Auth().EndSession(r.Context(), ck.Value); err != nil {
			return err
		}
	}
	clearSessionCookie(w, c.secure())
	http.Redirect(w, r, "/login?signed_out=1", http.StatusSeeOther)
	return nil
}

// returnPath is where a sign-in sends the browser: next when it is a page of the console, of the
// administrator or the device approval page (with its query: the user code), else the identity's start page.
func returnPath(next string, id *models.Identity) string {
	if next != "" && models.SafeReturnPath(next) && (strings.HasPrefix(next, consolePrefix) ||
		strings.HasPrefix(next, adminPrefix) || next == models.DeviceVerificationPath ||
		strings.HasPrefix(next, models.DeviceVerificationPath+"?")) {
		return next
	}
	return homeOf(id)
}

// homeOf is the start page of an identity.
func homeOf(id *models.Identity) string {
	if id.Kind == models.IdentityAdmin {
		return adminPrefix
	}
	return consolePrefix
}

// clearSessionCookie removes the session cookie from the browser.
func clearSessionCookie(w http.ResponseWriter, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: models.SessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

// signInForm fills the sign-in page, setting the pre-session cookie of its token when the browser has
// none; an optional message becomes its error.
func (c *Console) signInForm(w http.ResponseWriter, r *http.Request, next string, msg ...string) signInView {
	p := signInView{Chrome: c.publicChrome(r, "Sign in", false), FormToken: c.forms.token(w, r, nil), Next: next}
	if !models.SafeReturnPath(next) {
		p.Next = ""
	}
	if len(msg) > 0 {
		p.Error = msg[0]
	}
	return p
}

// clientAddress is the caller's network address, the subject of per-address limits.
func clientAddress(r *http.Request) string { return models.AddressKey(r.RemoteAddr) }

// codeLink is the sign-in-by-code page, keeping where the sign-in returns to.
func codeLink(next string) string {
	if next == "" {
		return "/login/code"
	}
	return "/login/code?next=" + url.QueryEscape(next)
}

// signInLink is the sign-in page, keeping where it returns to.
func signInLink(next string) string {
	if next == "" {
		return "/login"
	}
	return "/login?next=" + url.QueryEscape(next)
}
