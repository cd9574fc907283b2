package web

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"studio/models"
)

// Every form of the browser surface (the console, sign-in, sign-in by code, the claim pages and device
// approval) is defended against cross-site request forgery in one way, by formGuard:
//
//   - http.CrossOriginProtection refuses a POST that the browser says another site sent (Sec-Fetch-Site
//     cross-site or same-site; without Sec-Fetch-Site, an Origin naming another host). The origins of
//     {base_url} and {claim_site_url} are trusted, for a reverse proxy that changes the Host header.
//     A request with neither header (not a browser, or a very old one) passes this step.
//   - The form carries the token its page was served with, in the one hidden field "csrf" (csrfField):
//     on a signed-in page the session's own token (models.Session.CSRF, stored with the session), on
//     a page without a session an HMAC of the browser's pre-session cookie (formCookie), set with the
//     page when the browser has none.
//
// A POST that fails either is refused with errFormExpired (403) before anything changes; each page
// shows it as it always has (the console's error page, or its own form again with formExpiredText,
// and claimExpiredText on the Chinese claim pages). The API surfaces (/api/..., /graphql) do not use
// this guard: they authenticate by a key in a header, never by a cookie, so a page of another site
// cannot make a browser send a credential to them (docs/security.md).

// formField is the name of the hidden field that carries the token in every form.
const formField = "csrf"

// formCookie names the pre-session cookie that binds the token of a page without a session.
const formCookie = "studio_form"

// errFormExpired refuses a form that another site sent or that lacks its token: the one refusal of
// formGuard.check, 403 (the console shows this sentence on its error page).
var errFormExpired = models.Forbidden("this form has expired or did not come from this site: reload the page and try again")

// formExpiredText and claimExpiredText are how the pages with a form of their own (sign-in, sign-in by
// code, device approval; the claim pages, in Chinese) show errFormExpired above the form.
const (
	formExpiredText  = "This form has expired. Reload the page and try again."
	claimExpiredText = "页面已过期，请刷新后重新提交。"
)

// formGuard makes and checks the token of every form, and refuses cross-site form posts.
type formGuard struct {
	svc   *models.App
	xsite *http.CrossOriginProtection
}

// newFormGuard returns the guard of the browser surface, trusting the origins of the service's public
// URLs ({base_url}, {claim_site_url}).
func newFormGuard(svc *models.App) *formGuard {
	g := &formGuard{svc: svc, xsite: http.NewCrossOriginProtection()}
	for _, own := range []string{svc.Config.BaseURL, svc.Config.ClaimSiteURL} {
		if o := originOf(own); o != "" {
			_ = g.xsite.AddTrustedOrigin(o)
		}
	}
	return g
}

// originOf returns the origin a browser names for pages under a URL (scheme://host[:port], without
// the scheme's default port), or "" for a URL that is not absolute.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if p := u.Port(); (scheme == "https" && p == "443") || (scheme == "http" && p == "80") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return scheme + "://" + host
}

// token returns the token of the forms of a page: the session's own token when the page is signed in
// (sess), else the HMAC of the browser's pre-session cookie, which is set first when the browser has none.
func (g *formGuard) token(w http.ResponseWriter, r *http.Request, sess *models.ConsoleSession) string {
	if sess != nil {
		return sess.CSRF
	}
	if ck, err := r.Cookie(formCookie); err == nil && len(ck.Value) >= 32 {
		return g.sign(ck.Value)
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	value := base64.RawURLEncoding.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: formCookie, Value: value, Path: "/", HttpOnly: true,
		Secure: strings.HasPrefix(g.svc.Config.BaseURL, "https://"), SameSite: http.SameSiteLaxMode})
	return g.sign(value)
}

// check refuses, with errFormExpired, a form post that another site sent (http.CrossOriginProtection)
// or that does not carry the token token gave its page. The body must have been read (ParseForm or
// ParseMultipartForm) with its bounds already.
func (g *formGuard) check(r *http.Request, sess *models.ConsoleSession) error {
	if err := g.xsite.Check(r); err != nil {
		return errFormExpired
	}
	want := ""
	if sess != nil {
		want = sess.CSRF
	} else if ck, err := r.Cookie(formCookie); err == nil && len(ck.Value) >= 32 {
		want = g.sign(ck.Value)
	}
	if want == "" || !models.EqualHash(r.PostFormValue(formField), want) {
		return errFormExpired
	}
	return nil
}

// sign is the token of a pre-session cookie value.
func (g *formGuard) sign(v string) string {
	return g.svc.Auth().SignForm("form", v)
}
