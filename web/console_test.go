package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

// These tests drive the console over HTTP without a browser: sign-in, sessions, CSRF, permission
// boundaries, the pages' headers, the claim pages and the event stream of the jobs page.

func TestSignInSetsAServerSideSessionCookie(t *testing.T) {
	e := newEnv(t, "SERVICE_BASE_URL", "https://studio.example")
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	p := b.get("/login")
	token := formTokenRE.FindStringSubmatch(p.Body)[1]
	res := b.post("/login", url.Values{"csrf": {token}, "method": {"key"}, "key": {key}})
	if res.Status != http.StatusSeeOther || res.Location != "/console" {
		t.Fatalf("sign in = %d %q, want 303 /console", res.Status, res.Location)
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: res.Header}).Cookies() {
		if c.Name == models.SessionCookie {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("no %s cookie in %v", models.SessionCookie, res.Header["Set-Cookie"])
	}
	if !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteLaxMode || session.Path != "/" {
		t.Errorf("cookie = %+v, want HttpOnly, Secure (https base URL), SameSite=Lax, Path=/", session)
	}
	if session.MaxAge != int(models.SessionTTL/time.Second) {
		t.Errorf("cookie max-age = %d, want %d", session.MaxAge, int(models.SessionTTL/time.Second))
	}
	var stored models.Session
	if err := e.app.DB.Gorm.First(&stored, "id = ?", models.HashKey(session.Value)).Error; err != nil {
		t.Fatalf("session row: %v", err)
	}
	if stored.Kind != "tenant" || stored.KeyHash != models.HashKey(key) || stored.CSRF == "" {
		t.Errorf("stored session = %+v", stored)
	}
	var n int64
	e.app.DB.Gorm.Model(&models.Session{}).Where("id = ?", session.Value).Count(&n)
	if n != 0 {
		t.Error("the cookie value itself is stored; only its SHA-256 may be")
	}
}

func TestSignInRefusals(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	token := formTokenRE.FindStringSubmatch(b.get("/login").Body)[1]
	cases := []struct {
		name   string
		form   url.Values
		status int
		want   string
	}{
		{"wrong key", url.Values{"csrf": {token}, "method": {"key"}, "key": {models.NewAPIKey()}}, 401, "invalid API key"},
		{"no form token", url.Values{"method": {"key"}, "key": {key}}, 403, "This form has expired"},
		{"forged form token", url.Values{"csrf": {"x" + token}, "method": {"key"}, "key": {key}}, 403, "This form has expired"},
		{"wrong password", url.Values{"csrf": {token}, "method": {"password"}, "email": {"nobody@example.com"}, "password": {"secret123"}}, 401, "wrong e-mail or password"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := b.post("/login", tc.form)
			if p.Status != tc.status || !strings.Contains(p.Body, tc.want) {
				t.Fatalf("status %d, want %d with %q: %s", p.Status, tc.status, tc.want, excerpt(p.Body))
			}
			for _, c := range (&http.Response{Header: p.Header}).Cookies() {
				if c.Name == models.SessionCookie && c.Value != "" {
					t.Fatal("a refused sign-in set a session cookie")
				}
			}
		})
	}
	// A sign-in form posted by another site: the browser does not send the SameSite pre-session cookie.
	other := e.browser()
	if p := other.post("/login", url.Values{"csrf": {token}, "method": {"key"}, "key": {key}}); p.Status != 403 {
		t.Fatalf("cross-site sign-in = %d, want 403", p.Status)
	}
}

func TestSignInWithPasswordOpensAPersonalSession(t *testing.T) {
	e := newEnv(t)
	u := models.User{ID: models.NewID(), Email: "ann@example.com", Nickname: "ann"}
	if err := e.app.DB.Gorm.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	if err := e.app.Auth().ChangePassword(context.Background(), modelstest.User(u.ID), "", "correct horse"); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	token := formTokenRE.FindStringSubmatch(b.get("/login").Body)[1]
	p := b.post("/login", url.Values{"csrf": {token}, "method": {"password"}, "email": {"ann@example.com"}, "password": {"correct horse"}})
	if p.Status != http.StatusSeeOther || p.Location != "/console" {
		t.Fatalf("password sign-in = %d %q: %s", p.Status, p.Location, excerpt(p.Body))
	}
	if d := b.get("/console"); d.Status != 200 || !strings.Contains(d.Body, "ann@example.com") || !strings.Contains(d.Body, "积分余额") { // no Accept-Language: a buyer gets Chinese
		t.Fatalf("dashboard of a personal account = %d: %s", d.Status, excerpt(d.Body))
	}
}

func TestCSRFIsCheckedOnEveryPost(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	b.signIn(key)
	good := b.csrf()
	form := func(csrf string) url.Values {
		v := url.Values{"email": {"m@example.com"}, "mode": {"shared"}}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		return v
	}
	cases := []struct {
		name    string
		form    url.Values
		headers []string
	}{
		{"missing token", form(""), nil},
		{"wrong token", form("not-the-token"), nil},
		{"token of another session", form(func() string { o := e.browser(); o.signIn(key); return o.csrf() }()), nil},
		{"foreign origin", form(good), []string{"Origin", "https://evil.example"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := b.do(http.MethodPost, "/console/members", tc.form, tc.headers...)
			if p.Status != http.StatusForbidden {
				t.Fatalf("status %d, want 403: %s", p.Status, excerpt(p.Body))
			}
			if accs, _ := e.app.Accounts().Accounts(context.Background(), modelstest.Tenant(mustTenant(t, e, key))); len(accs) != 0 {
				t.Fatalf("a member was created by a refused post: %+v", accs)
			}
		})
	}
	// Sign-out is a POST too.
	if p := b.post("/logout", url.Values{}); p.Status != http.StatusForbidden {
		t.Fatalf("sign-out without token = %d, want 403", p.Status)
	}
	p := b.post("/console/members", form(good))
	if p.Status != http.StatusSeeOther {
		t.Fatalf("with the token = %d, want 303: %s", p.Status, excerpt(p.Body))
	}
	if next := b.get(p.Location); !strings.Contains(next.Body, "New key for m@example.com") {
		t.Fatalf("the new key is not shown after the redirect: %s", excerpt(next.Body))
	}
	if again := b.get(p.Location); strings.Contains(again.Body, "New key for") {
		t.Fatal("the new key is shown a second time")
	}
}

// mustTenant resolves a tenant key to its tenant id.
func mustTenant(t *testing.T, e *env, key string) string {
	t.Helper()
	id, err := e.app.Auth().ResolveIdentity(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return id.TenantID
}

func TestSessionExpiresAfterTwelveHours(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	b.signIn(key)
	start := time.Now().UTC()
	e.app.Now = func() time.Time { return start.Add(models.SessionTTL - time.Minute) }
	if p := b.get("/console"); p.Status != 200 {
		t.Fatalf("before expiry = %d, want 200", p.Status)
	}
	e.app.Now = func() time.Time { return start.Add(models.SessionTTL + time.Minute) }
	p := b.get("/console/members")
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/login?next=") {
		t.Fatalf("after expiry = %d %q, want a redirect to /login", p.Status, p.Location)
	}
	e.app.Now = func() time.Time { return time.Now().UTC() }
	if p := b.get("/console"); p.Status != http.StatusSeeOther {
		t.Fatalf("the expired session came back: %d", p.Status)
	}
}

func TestKeyChangesEndSessionsAtOnce(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("Acme", 10)
	tenant, member := e.browser(), e.browser()
	tenant.signIn(key)
	csrf := tenant.csrf()
	created := tenant.post("/console/members", url.Values{"csrf": {csrf}, "email": {"m@example.com"}, "mode": {"shared"}})
	memberKey := newKeyRE.FindStringSubmatch(tenant.get(created.Location).Body)
	if memberKey == nil {
		t.Fatalf("no member key shown: %s", excerpt(created.Body))
	}
	member.signIn(memberKey[1])
	if p := member.get("/console/jobs"); p.Status != 200 {
		t.Fatalf("member jobs = %d", p.Status)
	}
	accs, _ := e.app.Accounts().Accounts(context.Background(), modelstest.Tenant(tenantID))
	if p := tenant.post("/console/members/"+accs[0].ID, url.Values{"csrf": {csrf}, "op": {"disable"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("disable = %d: %s", p.Status, excerpt(p.Body))
	}
	if p := member.get("/console/jobs"); p.Status != http.StatusSeeOther {
		t.Fatalf("a disabled member's session = %d, want a redirect to /login", p.Status)
	}
	e.admin(map[string]any{"action": "tenant-rekey", "tenant_id": tenantID})
	if p := tenant.get("/console"); p.Status != http.StatusSeeOther {
		t.Fatalf("the session of a rekeyed tenant key = %d, want a redirect to /login", p.Status)
	}
}

var newKeyRE = regexp.MustCompile(`id="new-key" readonly value="([^"]+)"`)

func TestSignOutEndsTheSession(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	b.signIn(key)
	p := b.post("/logout", url.Values{"csrf": {b.csrf()}})
	if p.Status != http.StatusSeeOther || p.Location != "/login?signed_out=1" {
		t.Fatalf("sign out = %d %q", p.Status, p.Location)
	}
	var n int64
	e.app.DB.Gorm.Model(&models.Session{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d sessions left after sign-out", n)
	}
	if p := b.get("/console"); p.Status != http.StatusSeeOther {
		t.Fatalf("after sign-out /console = %d, want a redirect", p.Status)
	}
}

func TestPermissionBoundaries(t *testing.T) {
	e := newEnv(t)
	tenantID, tenantKey := e.tenant("Acme", 10)
	acc, err := e.app.Accounts().CreateAccount(context.Background(), modelstest.Tenant(tenantID), models.AccountInput{Email: "m@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	claimTpl := e.platformTemplate("海报", "poster")
	credits := int64(2)
	code, err := e.app.Claims().CreateClaimCode(context.Background(), modelstest.Tenant(tenantID), models.ClaimInput{TemplateIDs: []string{claimTpl}, Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	redeemed, err := e.app.Claims().RedeemClaim(context.Background(), models.RedeemInput{Code: code.Code, Nickname: "bo", Email: "bo@example.com"}, "")
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]*browser{"none": e.browser()}
	for name, key := range map[string]string{"admin": e.adminKey, "tenant": tenantKey, "account": *acc.APIKey, "user": *redeemed.Token} {
		sessions[name] = e.browser()
		sessions[name].signIn(key)
	}
	tenantPages := []string{"/console/members", "/console/hooks", "/console/claims", "/console/settings"}
	adminPages := []string{"/admin", "/admin/upstreams", "/admin/claims", "/admin/invitations", "/admin/templates"}
	type check struct {
		who, method, path string
		status            int
	}
	var checks []check
	for _, p := range append(append([]string{"/console", "/console/jobs", "/console/templates"}, tenantPages...), adminPages...) {
		checks = append(checks, check{"none", "GET", p, http.StatusSeeOther})
	}
	for _, p := range adminPages {
		checks = append(checks, check{"tenant", "GET", p, 403}, check{"account", "GET", p, 403}, check{"user", "GET", p, 403}, check{"admin", "GET", p, 200})
	}
	for _, p := range tenantPages {
		checks = append(checks, check{"tenant", "GET", p, 200}, check{"account", "GET", p, 403}, check{"user", "GET", p, 403}, check{"admin", "GET", p, 403})
	}
	checks = append(checks,
		check{"admin", "GET", "/console", 403}, check{"admin", "GET", "/console/jobs", 403},
		check{"account", "GET", "/console", 200}, check{"account", "GET", "/console/jobs", 200},
		check{"account", "GET", "/console/templates", 200}, check{"account", "GET", "/console/templates/new", 403},
		check{"user", "GET", "/console", 200}, check{"user", "GET", "/console/templates/new", 200},
		check{"tenant", "GET", "/console/templates/new", 200},
		check{"account", "POST", "/console/members", 403}, check{"account", "POST", "/console/members/" + acc.ID, 403},
		check{"account", "POST", "/console/claims", 403}, check{"account", "POST", "/console/hooks", 403},
		check{"tenant", "POST", "/admin/tenants", 403}, check{"tenant", "POST", "/admin/claims/" + code.Code, 403},
		check{"tenant", "POST", "/admin/upstreams/img-a", 403}, check{"user", "POST", "/admin/invitations", 403},
		check{"admin", "POST", "/console/members", 403}, check{"admin", "POST", "/console/claims", 403},
	)
	csrf := map[string]string{}
	for name, b := range sessions {
		if name != "none" {
			csrf[name] = b.csrf()
		}
	}
	for _, c := range checks {
		t.Run(c.who+" "+c.method+" "+c.path, func(t *testing.T) {
			b := sessions[c.who]
			var p *page
			if c.method == "GET" {
				p = b.get(c.path)
			} else {
				p = b.post(c.path, url.Values{"csrf": {csrf[c.who]}, "email": {"x@example.com"}, "mode": {"shared"},
					"name": {"Evil"}, "credits": {"1"}, "op": {"rekey"}, "count": {"1"}})
			}
			if p.Status != c.status {
				t.Fatalf("status %d, want %d: %s", p.Status, c.status, excerpt(p.Body))
			}
			if c.status == http.StatusSeeOther && !strings.HasPrefix(p.Location, "/login") {
				t.Fatalf("redirect to %q, want /login", p.Location)
			}
		})
	}
	// Nothing the refused posts asked for happened.
	accs, _ := e.app.Accounts().Accounts(context.Background(), modelstest.Tenant(tenantID))
	if len(accs) != 1 || *accs[0].APIKey != *acc.APIKey {
		t.Errorf("members changed by refused posts: %+v", accs)
	}
	tenants, _ := e.app.Accounts().Tenants(context.Background(), models.Operator())
	if len(tenants) != 1 {
		t.Errorf("a tenant was created by a refused post: %d tenants", len(tenants))
	}
	if p, _ := e.app.Claims().PreviewClaim(context.Background(), code.Code, ""); p.Status != models.ClaimUsed {
		t.Errorf("claim code status = %s, want used (not voided)", p.Status)
	}
}

func TestPagesCarrySecurityHeaders(t *testing.T) {
	e := newEnv(t, "SERVICE_CDN_URL", "https://cdn.example.com/media")
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	b.signIn(key)
	for _, path := range []string{"/login", "/console", "/console/jobs", "/claim/promo-unknown"} {
		p := b.get(path)
		csp := p.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "img-src 'self' data: https://cdn.example.com", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if p.Header.Get("X-Frame-Options") != "DENY" || p.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: X-Frame-Options %q, Cache-Control %q", path, p.Header.Get("X-Frame-Options"), p.Header.Get("Cache-Control"))
		}
		if strings.Contains(p.Body, "<script>") || strings.Contains(p.Body, " style=") || strings.Contains(p.Body, "<style") {
			t.Errorf("%s has inline script or style, which the CSP forbids", path)
		}
	}
	for _, f := range []string{"style.css", "console.js", "htmx.min.js"} {
		p := b.get("/static/" + f)
		if p.Status != 200 || !strings.Contains(p.Header.Get("Cache-Control"), "max-age=31536000") {
			t.Errorf("/static/%s = %d, Cache-Control %q", f, p.Status, p.Header.Get("Cache-Control"))
		}
	}
	if p := b.get("/static/"); p.Status != 404 {
		t.Errorf("/static/ lists the directory: %d", p.Status)
	}
}

func TestClaimPages(t *testing.T) {
	e := newEnv(t)
	tenantID, _ := e.tenant("Acme 店铺", 50)
	tpl := e.platformTemplate("海报模板", "poster")
	credits := int64(7)
	mk := func() string {
		c, err := e.app.Claims().CreateClaimCode(context.Background(), modelstest.Tenant(tenantID), models.ClaimInput{TemplateIDs: []string{tpl}, Credits: &credits,
			TutorialPDFURL: "https://cdn.example.com/tutorial.pdf"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Code
	}
	code, voided := mk(), mk()
	e.admin(map[string]any{"action": "promo-claim-disable", "code": voided})
	b := e.browser()

	if p := b.get("/claim/promo-doesnotexist"); p.Status != 404 || !strings.Contains(p.Body, "找不到这个领取码") || !strings.Contains(p.Body, `lang="zh-CN"`) {
		t.Fatalf("unknown code = %d: %s", p.Status, excerpt(p.Body))
	}
	if p := b.get("/claim/" + voided); p.Status != 410 || !strings.Contains(p.Body, "该领取码已停用") || strings.Contains(p.Body, "<form method=\"post\" action=\"/claim/") {
		t.Fatalf("disabled code = %d: %s", p.Status, excerpt(p.Body))
	}
	p := b.get("/claim/" + code)
	if p.Status != 200 || !strings.Contains(p.Body, "海报模板") || !strings.Contains(p.Body, "Acme 店铺") ||
		!strings.Contains(p.Body, `<meta name="viewport"`) || !strings.Contains(p.Body, "/samples/poster.png") {
		t.Fatalf("active code = %d: %s", p.Status, excerpt(p.Body))
	}
	token := formTokenRE.FindStringSubmatch(p.Body)[1]
	form := url.Values{"nickname": {"Bo"}, "email": {"bo@example.com"}}
	if p := b.post("/claim/"+code, form); p.Status != 403 {
		t.Fatalf("redeem without the form token = %d, want 403", p.Status)
	}
	if bad := b.post("/claim/"+code, url.Values{"csrf": {e.forgeClaimToken()}, "nickname": {"Bo"}, "email": {"bo@example.com"}}); bad.Status != 403 {
		t.Fatalf("redeem with another code's token = %d, want 403", bad.Status)
	}
	if pr, _ := e.app.Claims().PreviewClaim(context.Background(), code, ""); pr.Status != models.ClaimActive {
		t.Fatalf("a refused post redeemed the code: %s", pr.Status)
	}
	form.Set("csrf", token)
	if bad := b.post("/claim/"+code, url.Values{"csrf": {token}, "nickname": {"Bo"}, "email": {"not-an-email"}}); bad.Status != 400 || !strings.Contains(bad.Body, "请检查填写的内容") {
		t.Fatalf("invalid e-mail = %d: %s", bad.Status, excerpt(bad.Body))
	}
	ok := b.post("/claim/"+code, form)
	if ok.Status != 200 || !strings.Contains(ok.Body, "领取成功") || !strings.Contains(ok.Body, `id="granted-credits">7<`) ||
		!strings.Contains(ok.Body, "https://cdn.example.com/tutorial.pdf") || !strings.Contains(ok.Body, `href="`+e.app.Config.BaseURL+`/login"`) {
		t.Fatalf("redeem = %d: %s", ok.Status, excerpt(ok.Body))
	}
	tok := loginTokenRE.FindStringSubmatch(ok.Body)
	if tok == nil {
		t.Fatalf("no login token on the success page")
	}
	if status, bal := e.api("GET", "/api/balance", tok[1], nil); status != 200 || bal["credits"].(float64) != 7 {
		t.Fatalf("buyer balance = %d %v, want 7", status, bal)
	}
	used := b.get("/claim/" + code)
	if used.Status != 200 || !strings.Contains(used.Body, "该领取码已被领取") {
		t.Fatalf("used code = %d: %s", used.Status, excerpt(used.Body))
	}
	again := b.post("/claim/"+code, url.Values{"csrf": {formTokenRE.FindStringSubmatch(used.Body)[1]}, "nickname": {"Cy"}, "email": {"cy@example.com"}})
	if again.Status != 409 || !strings.Contains(again.Body, "已被其他邮箱领取") {
		t.Fatalf("redeem by another e-mail = %d: %s", again.Status, excerpt(again.Body))
	}
}

var loginTokenRE = regexp.MustCompile(`id="login-token" readonly rows="3" spellcheck="false">([^<]+)<`)

// forgeClaimToken returns a valid redeem-form token of another, active code, served to another browser:
// the token is bound to that browser's pre-session cookie, so it must be refused here.
func (e *env) forgeClaimToken() string {
	e.t.Helper()
	tenantID, _ := e.tenant("Other", 5)
	tpl := e.platformTemplate("其他", "other-template")
	credits := int64(1)
	c, err := e.app.Claims().CreateClaimCode(context.Background(), modelstest.Tenant(tenantID), models.ClaimInput{TemplateIDs: []string{tpl}, Credits: &credits})
	if err != nil {
		e.t.Fatal(err)
	}
	return formTokenRE.FindStringSubmatch(e.browser().get("/claim/" + c.Code).Body)[1]
}

func TestTemplateEditorWithoutJavaScript(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	b.signIn(key)
	csrf := b.csrf()
	form := url.Values{"csrf": {csrf}, "type": {"image"}, "zh_name": {"海报"}, "slug": {"acme-poster"}, "model": {"auto"},
		"active": {"on"}, "prompt_template": {"a poster of {subject} in {style}"},
		"field_key": {"subject"}, "field_label": {"Subject"}, "field_type": {"text"}, "field_required": {"yes"},
		"field_placeholder": {"a cat"}, "field_help": {""}, "field_options": {""}}
	// "Add a field" re-renders the form with one more row and saves nothing.
	add := url.Values{}
	for k, v := range form {
		add[k] = v
	}
	add.Set("op", "add-field")
	p := b.post("/console/templates/new", add)
	if p.Status != 200 || strings.Count(p.Body, `name="field_key"`) != 2 || !strings.Contains(p.Body, `value="subject"`) {
		t.Fatalf("add-field = %d with %d rows: %s", p.Status, strings.Count(p.Body, `name="field_key"`), excerpt(p.Body))
	}
	if rows, _ := e.app.Templates().ListTemplates(context.Background(), &models.Identity{Kind: models.IdentityTenant, TenantID: mustTenant(t, e, key)},
		models.TemplateFilter{Source: models.SourceMine}); len(rows) != 0 {
		t.Fatal("add-field saved the template")
	}
	// A select field without options is refused by the core, and the form keeps what was typed.
	form["field_key"] = []string{"subject", "style"}
	form["field_label"] = []string{"Subject", "Style"}
	form["field_type"] = []string{"text", "select"}
	form["field_required"] = []string{"yes", "yes"}
	form["field_placeholder"] = []string{"a cat", ""}
	form["field_help"] = []string{"", ""}
	form["field_options"] = []string{"", ""}
	if p := b.post("/console/templates/new", form); p.Status != 400 || !strings.Contains(p.Body, "options") || !strings.Contains(p.Body, `value="style"`) {
		t.Fatalf("select without options = %d: %s", p.Status, excerpt(p.Body))
	}
	form["field_options"] = []string{"", "oil|Oil painting\nwatercolor|Watercolor"}
	p = b.post("/console/templates/new", form)
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/console/templates/") {
		t.Fatalf("save = %d %q: %s", p.Status, p.Location, excerpt(p.Body))
	}
	editPath := strings.Split(p.Location, "?")[0]
	edit := b.get(p.Location)
	if edit.Status != 200 || !strings.Contains(edit.Body, "Template saved.") || !strings.Contains(edit.Body, "oil|Oil painting") {
		t.Fatalf("editor = %d: %s", edit.Status, excerpt(edit.Body))
	}
	prev := b.post(editPath+"/preview", url.Values{"csrf": {csrf}, "in_subject": {"a fox"}, "in_style": {"watercolor"}})
	if prev.Status != 200 || !strings.Contains(prev.Body, "a poster of a fox in watercolor") {
		t.Fatalf("preview = %d: %s", prev.Status, excerpt(prev.Body))
	}
	frag := b.do(http.MethodPost, editPath+"/preview", url.Values{"csrf": {csrf}, "in_style": {"oil"}}, "HX-Request", "true")
	if frag.Status != 200 || strings.Contains(frag.Body, "<html") || !strings.Contains(frag.Body, "subject") {
		t.Fatalf("htmx preview with a missing field = %d: %s", frag.Status, excerpt(frag.Body))
	}
	row := b.get("/console/templates/field-row")
	if row.Status != 200 || strings.Contains(row.Body, "<html") || !strings.Contains(row.Body, `name="field_options"`) {
		t.Fatalf("field-row fragment = %d: %s", row.Status, excerpt(row.Body))
	}
}

func TestJobEventsStreamChanges(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	b.signIn(key)
	e.fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 800 * time.Millisecond})
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/console/jobs/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := b.client.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	status, sub := e.api("POST", "/api/generate", key, map[string]any{"prompt": "a red fox"})
	if status != 200 {
		t.Fatalf("submit = %d %v", status, sub)
	}
	jobID := sub["jobId"].(string)
	sc := bufio.NewScanner(res.Body)
	var seen []string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, jobID) {
			seen = append(seen, line)
			if strings.Contains(line, `"status":"done"`) {
				break
			}
		}
	}
	if len(seen) == 0 || !strings.Contains(seen[len(seen)-1], `"status":"done"`) || !strings.Contains(seen[len(seen)-1], "cdn_url") {
		t.Fatalf("events of the job: %v (scan error %v)", seen, sc.Err())
	}
	for _, leak := range []string{"img-a", "prov-a", "a red fox"} {
		for _, s := range seen {
			if strings.Contains(s, leak) {
				t.Fatalf("event leaks %q: %s", leak, s)
			}
		}
	}
}

func TestAdminConsoleRunsAdministratorActions(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	if to := b.signIn(e.adminKey); to != "/admin" {
		t.Fatalf("administrator lands on %q, want /admin", to)
	}
	csrf := b.csrf()

	p := b.post("/admin/tenants", url.Values{"csrf": {csrf}, "name": {"Globex"}, "credits": {"30"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("create tenant = %d: %s", p.Status, excerpt(p.Body))
	}
	page := b.get(p.Location)
	key := newKeyRE.FindStringSubmatch(page.Body)
	if key == nil || !strings.Contains(page.Body, "Globex") {
		t.Fatalf("tenant key not shown: %s", excerpt(page.Body))
	}
	id, err := e.app.Auth().ResolveIdentity(context.Background(), key[1])
	if err != nil || id.Kind != models.IdentityTenant {
		t.Fatalf("shown key resolves to %+v, %v", id, err)
	}
	if p := b.post("/admin/tenants/"+id.TenantID, url.Values{"csrf": {csrf}, "op": {"credit"}, "credits": {"-5"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("credit = %d: %s", p.Status, excerpt(p.Body))
	}
	if pool, _ := e.app.Credits().Pool(context.Background(), id); pool.Balance != 25 {
		t.Fatalf("balance after -5 = %d, want 25", pool.Balance)
	}
	if p := b.post("/admin/tenants/"+id.TenantID, url.Values{"csrf": {csrf}, "op": {"bind"}, "model": {"gen2"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("bind = %d: %s", p.Status, excerpt(p.Body))
	}
	if p := b.post("/admin/tenants/"+id.TenantID, url.Values{"csrf": {csrf}, "op": {"bind"}, "model": {"no-such-family"}}); p.Status != 400 {
		t.Fatalf("bind to an unknown family = %d, want 400", p.Status)
	}
	if tn, _ := e.app.Accounts().TenantSettings(context.Background(), id); tn.Binding != "gen2" {
		t.Fatalf("binding = %q", tn.Binding)
	}
	p = b.post("/admin/tenants/"+id.TenantID, url.Values{"csrf": {csrf}, "op": {"rekey"}})
	rekeyed := newKeyRE.FindStringSubmatch(b.get(p.Location).Body)
	if rekeyed == nil || rekeyed[1] == key[1] {
		t.Fatalf("rekey did not show a new key")
	}
	if _, err := e.app.Auth().ResolveIdentity(context.Background(), key[1]); err == nil {
		t.Fatal("the old tenant key still works")
	}

	ups := b.get("/admin/upstreams")
	if ups.Status != 200 || !strings.Contains(ups.Body, `data-upstream="img-a"`) || !strings.Contains(ups.Body, "prov-a") {
		t.Fatalf("upstreams = %d: %s", ups.Status, excerpt(ups.Body))
	}
	if p := b.post("/admin/upstreams/img-a", url.Values{"csrf": {csrf}, "op": {"disable"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("disable upstream = %d: %s", p.Status, excerpt(p.Body))
	}
	if ups := b.get("/admin/upstreams?notice=upstream-disabled"); !strings.Contains(ups.Body, "disabled by an administrator") {
		t.Fatalf("upstream state not shown: %s", excerpt(ups.Body))
	}
	if p := b.post("/admin/upstreams/img-a", url.Values{"csrf": {csrf}, "op": {"enable"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("enable upstream = %d", p.Status)
	}

	tpl := e.platformTemplate("海报", "poster")
	credits := int64(3)
	code, err := e.app.Claims().CreateClaimCode(context.Background(), id, models.ClaimInput{TemplateIDs: []string{tpl}, Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	if list := b.get("/admin/claims"); !strings.Contains(list.Body, code.Code) || !strings.Contains(list.Body, "Globex") {
		t.Fatalf("admin claim list: %s", excerpt(list.Body))
	}
	if p := b.post("/admin/claims/"+code.Code, url.Values{"csrf": {csrf}}); p.Status != http.StatusSeeOther {
		t.Fatalf("void = %d: %s", p.Status, excerpt(p.Body))
	}
	if pr, _ := e.app.Claims().PreviewClaim(context.Background(), code.Code, ""); pr.Status != models.ClaimDisabled {
		t.Fatalf("code status after void = %s", pr.Status)
	}

	p = b.post("/admin/invitations", url.Values{"csrf": {csrf}, "count": {"3"}})
	inv := b.get(p.Location)
	if n := strings.Count(inv.Body, "inv-"); n != 3 {
		t.Fatalf("invitation page shows %d codes, want 3: %s", n, excerpt(inv.Body))
	}
	if again := b.get(p.Location); strings.Contains(again.Body, "inv-") {
		t.Fatal("invitation codes shown twice")
	}

	// Platform templates through the same editor, owned by the platform.
	p = b.post("/admin/templates/new", url.Values{"csrf": {csrf}, "type": {"article"}, "zh_name": {"小红书文案"}, "slug": {"xhs-copy"},
		"format": {"xiaohongshu"}, "active": {"on"}, "prompt_template": {"write about {topic}"},
		"field_key": {"topic"}, "field_label": {"Topic"}, "field_type": {"text"}, "field_required": {"yes"},
		"field_placeholder": {""}, "field_help": {""}, "field_options": {""}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/admin/templates/") {
		t.Fatalf("platform template = %d %q: %s", p.Status, p.Location, excerpt(p.Body))
	}
	rows, _ := e.app.Templates().ListTemplates(context.Background(), &models.Identity{Kind: models.IdentityTenant, TenantID: id.TenantID},
		models.TemplateFilter{Source: models.SourcePlatform, Type: models.TemplateArticle})
	if len(rows) != 1 || rows[0].ZhName != "小红书文案" {
		t.Fatalf("tenants see platform copy templates %+v", rows)
	}
	if list := b.get("/admin/templates"); !strings.Contains(list.Body, "小红书文案") {
		t.Fatalf("admin template list: %s", excerpt(list.Body))
	}
}

func TestTenantHooksSettingsAndSampleUpload(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("Acme", 10)
	b := e.browser()
	b.signIn(key)
	csrf := b.csrf()
	id := &models.Identity{Kind: models.IdentityTenant, TenantID: tenantID}
	img, err := e.app.Templates().CreateTemplate(context.Background(), id, models.TemplateInput{Type: "image", Slug: "acme-img", ZhName: "图",
		GenerationConfigs: json.RawMessage(`[{"prompt_template":"a {subject}","fields":[{"key":"subject","label":"S"}]}]`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.Templates().CreateTemplate(context.Background(), id, models.TemplateInput{Type: "article", Slug: "acme-copy", ZhName: "文",
		GenerationConfigs: json.RawMessage(`[{"format":"wechat","prompt_template":"about {topic}","fields":[{"key":"topic","label":"T"}]}]`)}); err != nil {
		t.Fatal(err)
	}

	// Hooks.
	p := b.post("/console/hooks", url.Values{"csrf": {csrf}, "image_template_slug": {"acme-img"}, "hook_type": {"article"},
		"hook_template_slug": {"acme-copy"}, "enabled": {"on"}, "note": {"copy after image"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("save hook = %d: %s", p.Status, excerpt(p.Body))
	}
	hooks, _ := e.app.Accounts().ListHooks(context.Background(), id, "")
	if len(hooks) != 1 || !hooks[0].Enabled || hooks[0].Note != "copy after image" {
		t.Fatalf("hooks = %+v", hooks)
	}
	if p := b.post("/console/hooks/"+hooks[0].ID, url.Values{"csrf": {csrf}, "op": {"disable"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("disable hook = %d", p.Status)
	}
	if hooks, _ = e.app.Accounts().ListHooks(context.Background(), id, ""); hooks[0].Enabled {
		t.Fatal("hook still enabled")
	}
	if p := b.post("/console/hooks", url.Values{"csrf": {csrf}, "image_template_slug": {"nope"}, "hook_type": {"article"},
		"hook_template_slug": {"acme-copy"}}); p.Status != 404 && p.Status != 400 {
		t.Fatalf("hook on an unknown template = %d", p.Status)
	}
	if p := b.post("/console/hooks/"+hooks[0].ID, url.Values{"csrf": {csrf}, "op": {"delete"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("delete hook = %d", p.Status)
	}
	if hooks, _ = e.app.Accounts().ListHooks(context.Background(), id, ""); len(hooks) != 0 {
		t.Fatal("hook not deleted")
	}

	// The callback secret.
	tn, _ := e.app.Accounts().TenantSettings(context.Background(), modelstest.Tenant(tenantID))
	if s := b.get("/console/settings"); !strings.Contains(s.Body, tn.CallbackSecret) || !strings.HasPrefix(tn.CallbackSecret, "whsec_") {
		t.Fatalf("settings do not show the whsec_ secret: %s", excerpt(s.Body))
	}

	// A sample image, posted through the upload core.
	var body strings.Builder
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("csrf", csrf)
	fw, _ := mw.CreateFormFile("file", "sample.png")
	pic := image.NewRGBA(image.Rect(0, 0, 8, 8))
	_ = png.Encode(fw, pic)
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/console/templates/"+img.ID+"/samples", strings.NewReader(body.String()))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sample upload = %d", res.StatusCode)
	}
	rows, _ := e.app.Templates().ListTemplates(context.Background(), id, models.TemplateFilter{Type: "image", Source: models.SourceMine})
	if len(rows) != 1 || len(rows[0].SampleImages) != 1 || !strings.HasPrefix(rows[0].SampleImages[0], e.app.Config.CDNURL+"/uploads/tenant-") {
		t.Fatalf("sample images = %+v", rows[0].SampleImages)
	}
	var uploads int64
	e.app.DB.Gorm.Model(&models.Upload{}).Where("owner_id = ?", tenantID).Count(&uploads)
	if uploads != 1 {
		t.Fatalf("%d uploads recorded, want 1 (the upload core records it)", uploads)
	}
	// Text is not an image: refused, nothing added.
	var bad strings.Builder
	mw = multipart.NewWriter(&bad)
	_ = mw.WriteField("csrf", csrf)
	fw, _ = mw.CreateFormFile("file", "notes.png")
	_, _ = fw.Write([]byte("just some text, not an image at all"))
	mw.Close()
	req, _ = http.NewRequest(http.MethodPost, e.srv.URL+"/console/templates/"+img.ID+"/samples", strings.NewReader(bad.String()))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if res, err = b.client.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Fatalf("text upload = %d, want 400", res.StatusCode)
	}
}

func TestDevicePageUsesTheConsoleLayout(t *testing.T) {
	e := newEnv(t)
	p := e.browser().get("/device?user_code=BCDF-GHJK")
	if !strings.Contains(p.Body, `href="/static/style.css?v=`) || strings.Contains(p.Body, "<style") ||
		!strings.Contains(p.Body, `<main id="main"`) || !strings.Contains(p.Body, `name="csrf"`) {
		t.Fatalf("device page = %d: %s", p.Status, excerpt(p.Body))
	}
	if csp := p.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "style-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("device page CSP = %q", csp)
	}
}
