package web

import (
	"context"
	"errors"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/a-h/templ"
	"github.com/gorilla/mux"

	"studio/models"
	"studio/models/media"
)

// The console is the browser surface for tenants, member accounts, personal accounts and the platform
// administrator, plus the public sign-in and claim pages. Every page resolves the browser's session to
// the same models.Identity that an API key resolves to, checks it against the core's capabilities, and
// calls the same core operations as the REST surface. Pages are plain HTML forms that work without
// JavaScript; htmx and web/static/console.js only enhance them (a field row added in place, live job
// progress, copy buttons).

// ConsoleOptions carries what cmd/ wires into the console.
type ConsoleOptions struct {
	// Media stores uploaded sample images (the same store as POST /api/upload-ref).
	Media media.Store
}

// Console serves the console, the sign-in pages, the claim landing pages and the static files.
type Console struct {
	svc   *models.App // the core: every operation goes through its domain services
	opts  ConsoleOptions
	csp   string
	forms *formGuard // the token and cross-site check of every form (web/forms.go)
}

// NewConsole returns the console over the core.
func NewConsole(svc *models.App, opts ConsoleOptions) *Console {
	return &Console{svc: svc, opts: opts, csp: contentSecurityPolicy(svc.Config.CDNURL), forms: newFormGuard(svc)}
}

// Register adds the console's routes to r.
func (c *Console) Register(r *mux.Router) {
	r.PathPrefix("/static/").Handler(staticHandler())
	r.Handle("/favicon.ico", faviconHandler()).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/", c.root).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/login", c.signInPage).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/login", c.signIn).Methods(http.MethodPost)
	r.HandleFunc("/login/code", c.signInCodePage).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/login/code", c.signInCode).Methods(http.MethodPost)
	r.HandleFunc("/logout", c.page("", c.signOut)).Methods(http.MethodPost)
	r.HandleFunc("/claim/{code}", c.claimPage).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/claim/{code}", c.claimRedeem).Methods(http.MethodPost)
	r.HandleFunc("/claim/{code}/password", c.claimPassword).Methods(http.MethodPost)
	c.registerTenant(r)
	c.registerAdmin(r)
}

// registerTenant adds the pages of tenants, member accounts and personal accounts under /console.
func (c *Console) registerTenant(r *mux.Router) {
	get, post := http.MethodGet, http.MethodPost
	r.HandleFunc("/console", c.page(models.CapGenerate, c.dashboard)).Methods(get)
	r.HandleFunc("/console/jobs", c.page(models.CapGenerate, c.jobsPage)).Methods(get)
	r.HandleFunc("/console/jobs", c.page(models.CapGenerate, c.submitJob)).Methods(post)
	r.HandleFunc("/console/jobs/events", c.page(models.CapGenerate, c.jobEvents)).Methods(get)
	c.registerTemplates(r, "/console")
	r.HandleFunc("/console/hooks", c.page(models.CapHooks, c.hooksPage)).Methods(get)
	r.HandleFunc("/console/hooks", c.page(models.CapHooks, c.saveHook)).Methods(post)
	r.HandleFunc("/console/hooks/{id}", c.page(models.CapHooks, c.changeHook)).Methods(post)
	r.HandleFunc("/console/members", c.page(models.CapManageMembers, c.membersPage)).Methods(get)
	r.HandleFunc("/console/members", c.page(models.CapManageMembers, c.createMember)).Methods(post)
	r.HandleFunc("/console/members/{id}", c.page(models.CapManageMembers, c.changeMember)).Methods(post)
	r.HandleFunc("/console/claims", c.page(models.CapClaimCodes, c.claimsPage)).Methods(get)
	r.HandleFunc("/console/claims", c.page(models.CapClaimCodes, c.createClaim)).Methods(post)
	r.HandleFunc("/console/settings", c.page(models.CapTenantSettings, c.settingsPage)).Methods(get)
}

// registerTemplates adds the template pages under prefix (/console, or /admin for platform templates).
func (c *Console) registerTemplates(r *mux.Router, prefix string) {
	read, write := models.CapReadTemplates, models.CapWriteTemplates
	if prefix == adminPrefix {
		read, write = models.CapAdminister, models.CapAdminister
	}
	r.HandleFunc(prefix+"/templates", c.page(read, c.templatesPage)).Methods(http.MethodGet)
	r.HandleFunc(prefix+"/templates/field-row", c.page(write, c.fieldRowFragment)).Methods(http.MethodGet)
	r.HandleFunc(prefix+"/templates/new", c.page(write, c.newTemplatePage)).Methods(http.MethodGet)
	r.HandleFunc(prefix+"/templates/new", c.page(write, c.saveTemplate)).Methods(http.MethodPost)
	r.HandleFunc(prefix+"/templates/{id}", c.page(write, c.editTemplatePage)).Methods(http.MethodGet)
	r.HandleFunc(prefix+"/templates/{id}", c.page(write, c.saveTemplate)).Methods(http.MethodPost)
	r.HandleFunc(prefix+"/templates/{id}/samples", c.page(write, c.uploadSample)).Methods(http.MethodPost)
	r.HandleFunc(prefix+"/templates/{id}/preview", c.page(read, c.previewTemplate)).Methods(http.MethodPost)
}

// visit is one signed-in request: the session's identity and the token its forms carry (formGuard).
type visit struct {
	id      *models.Identity
	csrf    string
	label   string
	section string // "/console" or "/admin": where links of shared pages (templates) point
	lang    lang   // the pages' language: a personal account's follow Accept-Language (pageLang)
}

// pageFunc is the shape of a signed-in page handler: it returns an error instead of writing one.
type pageFunc func(w http.ResponseWriter, r *http.Request, v *visit) error

// page wraps a signed-in page: security headers; no or an ended session redirects to /login; a
// missing capability is 403; every POST must pass formGuard.check with the session's token (else 403,
// nothing done).
// An empty capability admits any signed-in identity.
func (c *Console) page(need models.Capability, h pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.headers(w)
		sess, err := c.session(r)
		if err != nil {
			if models.KindOf(err) != models.KindUnauthenticated {
				c.fail(w, r, nil, err)
				return
			}
			clearSessionCookie(w, c.secure())
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		v := &visit{id: &sess.Identity, csrf: c.forms.token(w, r, sess), label: sess.Label, section: consolePrefix, lang: langEN}
		if v.id.Kind == models.IdentityUser {
			v.lang = pageLang(r, true)
		}
		if strings.HasPrefix(r.URL.Path, adminPrefix) {
			v.section = adminPrefix
		}
		if need != "" {
			if err := v.id.Require(need); err != nil {
				c.fail(w, r, v, err)
				return
			}
		}
		if r.Method == http.MethodPost {
			if err := c.readPost(w, r, sess); err != nil {
				c.fail(w, r, v, err)
				return
			}
		}
		if err := h(w, r, v); err != nil {
			c.fail(w, r, v, err)
		}
	}
}

// Sections of the console.
const (
	consolePrefix = "/console"
	adminPrefix   = "/admin"
)

// maxPartName bounds the field name and file name of a multipart file part, in bytes.
const maxPartName = 255

// checkFileParts checks the field names and file names of a form's file parts: text, and short.
func checkFileParts(files map[string][]*multipart.FileHeader) error {
	for name, list := range files {
		if err := models.CheckText("form field name", name); err != nil {
			return err
		}
		if len(name) > maxPartName {
			return models.Invalid("a form field name is longer than %d bytes", maxPartName)
		}
		for _, f := range list {
			if err := models.CheckText(name+" file name", f.Filename); err != nil {
				return err
			}
			if len(f.Filename) > maxPartName {
				return models.Invalid("the file name of %s is longer than %d bytes: rename the file", name, maxPartName)
			}
		}
	}
	return nil
}

// maxFormBody bounds a form body (uploads have their own bound).
const maxFormBody = 1 << 20

// readPost reads a bounded form body (multipart for uploads) and checks it with formGuard.check: sent
// by this site, with the session's token (errFormExpired otherwise).
func (c *Console) readPost(w http.ResponseWriter, r *http.Request, sess *models.ConsoleSession) error {
	var err error
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		r.Body = http.MaxBytesReader(w, r.Body, maxSampleUpload+maxFormBody)
		err = r.ParseMultipartForm(maxFormBody)
	} else {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
		err = r.ParseForm()
	}
	if err == nil {
		err = models.CheckValues("form", r.Form) // multipart fields; url-encoded ones were checked by httpmw.TextGuard
		if err == nil && r.MultipartForm != nil {
			err = checkFileParts(r.MultipartForm.File)
		}
		if err != nil {
			return err
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &models.Error{Kind: models.KindTooLarge, Message: "the form is too large (images: at most 8 MB)"}
	case err != nil:
		return models.Invalid("the form could not be read: reload the page and try again")
	}
	return c.forms.check(r, sess)
}

// session resolves the browser's session cookie.
func (c *Console) session(r *http.Request) (*models.ConsoleSession, error) {
	ck, err := r.Cookie(models.SessionCookie)
	if err != nil {
		return nil, models.Unauthenticated("not signed in")
	}
	return c.svc.Auth().ResolveSession(r.Context(), ck.Value)
}

// secure reports whether cookies must be Secure: the service is reached over https.
func (c *Console) secure() bool { return strings.HasPrefix(c.svc.Config.BaseURL, "https://") }

// headers sets the headers of every HTML page: no caching, no framing, and a content security policy
// that allows only this site's scripts and styles, and images from this site, data: URLs and the CDN.
func (c *Console) headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", c.csp)
}

// contentSecurityPolicy is the policy of every page; cdnURL adds the host of {cdn_url} to img-src.
func contentSecurityPolicy(cdnURL string) string {
	img := "'self' data:"
	if u, err := url.Parse(cdnURL); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		img += " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'self'; img-src " + img + "; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

// render writes a page with a status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page templ.Component) {
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if err := page.Render(r.Context(), w); err != nil && !errors.Is(err, context.Canceled) {
		slog.ErrorContext(r.Context(), "render page", "path", r.URL.Path, "err", err)
	}
}

// fail renders the error page of a core error with its status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	status, msg := pageError(r, err)
	ch := c.chrome(v, "Error", "")
	if status >= 500 {
		msg = ch.T(msg)
	}
	c.render(w, r, status, errorPage(ch, status, msg))
}

// pageError maps a core error to the status and sentence a page shows: the one place this happens for
// the console.
func pageError(r *http.Request, err error) (int, string) {
	var e *models.Error
	if !errors.As(err, &e) || e.Kind == models.KindInternal {
		slog.ErrorContext(r.Context(), "console page failed", "path", r.URL.Path, "err", err)
		return http.StatusInternalServerError, "Something went wrong on our side. Try again in a moment."
	}
	switch e.Kind {
	case models.KindInvalid, models.KindNoUpstream:
		return http.StatusBadRequest, e.Error()
	case models.KindUnauthenticated:
		return http.StatusUnauthorized, e.Error()
	case models.KindForbidden:
		return http.StatusForbidden, e.Error()
	case models.KindNotFound:
		return http.StatusNotFound, "Not found: " + e.Error() + "."
	case models.KindConflict:
		return http.StatusConflict, e.Error()
	case models.KindInsufficientCredits:
		return http.StatusPaymentRequired, e.Error()
	case models.KindRateLimited:
		return http.StatusTooManyRequests, e.Error()
	case models.KindTooLarge:
		return http.StatusRequestEntityTooLarge, e.Error()
	}
	return http.StatusServiceUnavailable, e.Error()
}

// seeOther redirects after a successful POST (post/redirect/get) with a notice code for the next page.
func seeOther(w http.ResponseWriter, r *http.Request, path, notice string) {
	if notice != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "notice=" + url.QueryEscape(notice)
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// notices are the fixed messages a redirect may ask the next page to show.
var notices = map[string]string{
	"job-submitted":     "Job submitted: its progress updates below.",
	"video-submitted":   "Video submitted: its progress shows in the videos list below.",
	"template-saved":    "Template saved.",
	"sample-added":      "Sample image uploaded and added to the template.",
	"hook-saved":        "Hook saved.",
	"hook-deleted":      "Hook deleted.",
	"quota-set":         "Quota updated.",
	"member-created":    "Member created. Copy its key now: it is shown once.",
	"member-rekeyed":    "New key issued: the old key stopped working. Copy the new key now: it is shown once.",
	"tenant-created":    "Tenant created. Copy its key now: it is shown once.",
	"tenant-rekeyed":    "New tenant key issued: the old key stopped working. Copy it now: it is shown once.",
	"claim-created":     "Claim code created.",
	"invitations-made":  "Invitation codes created. Copy them now: they are shown once.",
	"member-disabled":   "Member disabled: its key stops working at once.",
	"member-enabled":    "Member enabled.",
	"tenant-credited":   "Credits updated.",
	"tenant-bound":      "Binding updated.",
	"upstream-disabled": "Upstream disabled: it is out of rotation.",
	"upstream-enabled":  "Upstream enabled.",
	"claim-disabled":    "Claim code voided: it can no longer be redeemed.",
}

// notice returns the message a redirect asked for in the page's language, or "".
func notice(r *http.Request, v *visit) string {
	n := notices[r.URL.Query().Get("notice")]
	if n != "" && v != nil {
		return v.lang.T(n)
	}
	return n
}

// chrome is what the layout needs: the title, the language, the navigation and who is signed in.
type chrome struct {
	Title   string
	Lang    string // the lang attribute: "zh-CN" for the claim pages and, by Accept-Language, the buyer's pages
	L       lang   // the language of the page's text
	Nav     []navLink
	Who     string // who is signed in; empty on public pages
	CSRF    string // the session's form token (formGuard), for the sign-out form
	Notice  string
	Home    string // where the brand link points
	Scripts bool   // load htmx and console.js (every page but the claim pages)
}

// navLink is one entry of the main navigation.
type navLink struct {
	Href, Label string
	Current     bool
}

// chrome returns the layout data of a signed-in page (or of a public page when v is nil); current is
// the path of the navigation entry to mark as the current page.
func (c *Console) chrome(v *visit, title, current string) chrome {
	ch := chrome{Title: title, Lang: string(langEN), L: langEN, Home: "/login", Scripts: true}
	if v == nil {
		return ch
	}
	ch.L, ch.Lang, ch.Title = v.lang, string(v.lang), v.lang.T(title)
	ch.Who, ch.CSRF, ch.Home = v.label, v.csrf, consolePrefix
	add := func(cap models.Capability, href, label string) {
		if v.id.May(cap) {
			ch.Nav = append(ch.Nav, navLink{Href: href, Label: ch.T(label), Current: href == current})
		}
	}
	if v.id.Kind == models.IdentityAdmin {
		ch.Home = adminPrefix
		add(models.CapAdminister, adminPrefix, "Tenants")
		add(models.CapAdminister, adminPrefix+"/upstreams", "Upstreams")
		add(models.CapAdminister, adminPrefix+"/claims", "Claim codes")
		add(models.CapAdminister, adminPrefix+"/invitations", "Invitations")
		add(models.CapAdminister, adminPrefix+"/templates", "Platform templates")
		return ch
	}
	add(models.CapGenerate, consolePrefix, "Dashboard")
	add(models.CapGenerate, consolePrefix+"/jobs", "Jobs")
	add(models.CapReadTemplates, consolePrefix+"/templates", "Templates")
	add(models.CapHooks, consolePrefix+"/hooks", "Hooks")
	add(models.CapManageMembers, consolePrefix+"/members", "Members")
	add(models.CapClaimCodes, consolePrefix+"/claims", "Claim codes")
	add(models.CapTenantSettings, consolePrefix+"/settings", "Settings")
	return ch
}

// publicChrome returns the layout data of a public page in the language pageLang picks for r.
func (c *Console) publicChrome(r *http.Request, title string, buyer bool) chrome {
	ch := c.chrome(nil, title, "")
	ch.L = pageLang(r, buyer)
	ch.Lang, ch.Title = string(ch.L), ch.T(title)
	return ch
}
