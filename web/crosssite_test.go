package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"studio/models"
	"studio/models/modelstest"
	"studio/web"
)

// These tests drive the one defence of every form (web/forms.go: http.CrossOriginProtection and the
// form token) through the real HTTP surface, and check that the key-authenticated API is not behind it.

// crossSite are the headers of a form post that another site made the browser send: a browser that
// names the request's site in Sec-Fetch-Site (cross-site, or a sibling host: same-site), and an older
// browser that sends only an Origin naming another host.
var crossSite = []struct {
	name    string
	headers []string
}{
	{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}},
	{"Sec-Fetch-Site same-site", []string{"Sec-Fetch-Site", "same-site", "Origin", "https://evil.studio.example"}},
	{"foreign Origin only", []string{"Origin", "https://evil.example"}},
}

// sameOrigin are the headers a browser sends with a form posted from the page of this site.
func (e *env) sameOrigin() []string {
	return []string{"Sec-Fetch-Site", "same-origin", "Origin", e.srv.URL}
}

// formFamily is one kind of form: how to get a browser with its page, the form as the page would post
// it, what a refusal shows, whether the change happened, and the answer of the form when it works.
type formFamily struct {
	name    string
	setup   func(t *testing.T, e *env) (b *browser, path string, form url.Values, changed func() bool)
	refusal string // text of the refusal page
	works   func(p *page) bool
}

func TestCrossSiteFormPostsAreRefused(t *testing.T) {
	ctx := context.Background()
	families := []formFamily{
		{
			name: "console: create a member",
			setup: func(t *testing.T, e *env) (*browser, string, url.Values, func() bool) {
				_, key := e.tenant("Acme", 10)
				b := e.browser()
				b.signIn(key)
				form := url.Values{"csrf": {b.csrf()}, "email": {"m@example.com"}, "mode": {"shared"}}
				return b, "/console/members", form, func() bool {
					accs, _ := e.app.Accounts().Accounts(ctx, modelstest.Tenant(mustTenant(t, e, key)))
					return len(accs) > 0
				}
			},
			refusal: "did not come from this site",
			works:   func(p *page) bool { return p.Status == http.StatusSeeOther },
		},
		{
			name: "console: sign out",
			setup: func(t *testing.T, e *env) (*browser, string, url.Values, func() bool) {
				_, key := e.tenant("Acme", 10)
				b := e.browser()
				b.signIn(key)
				form := url.Values{"csrf": {b.csrf()}}
				return b, "/logout", form, func() bool { return b.get("/console").Status != http.StatusOK }
			},
			refusal: "did not come from this site",
			works:   func(p *page) bool { return p.Status == http.StatusSeeOther && p.Location == "/login?signed_out=1" },
		},
		{
			name: "sign-in",
			setup: func(t *testing.T, e *env) (*browser, string, url.Values, func() bool) {
				_, key := e.tenant("Acme", 10)
				b := e.browser()
				form := url.Values{"csrf": {formTokenRE.FindStringSubmatch(b.get("/login").Body)[1]}, "method": {"key"}, "key": {key}}
				return b, "/login", form, func() bool {
					var n int64
					e.app.DB.Gorm.Model(&models.Session{}).Count(&n)
					return n > 0
				}
			},
			refusal: "This form has expired",
			works:   func(p *page) bool { return p.Status == http.StatusSeeOther && p.Location == "/console" },
		},
		{
			name: "sign-in by e-mailed code (first password)",
			setup: func(t *testing.T, e *env) (*browser, string, url.Values, func() bool) {
				b := e.browser()
				form := url.Values{"csrf": {formTokenRE.FindStringSubmatch(b.get("/login/code").Body)[1]}, "step": {"send"}, "email": {"new@example.com"}}
				return b, "/login/code", form, func() bool {
					var n int64
					e.app.DB.Gorm.Model(&models.EmailCode{}).Count(&n)
					return n > 0
				}
			},
			refusal: "页面已过期，请刷新后重试。", // a buyer's page: Chinese without Accept-Language
			works:   func(p *page) bool { return p.Status == http.StatusOK && strings.Contains(p.Body, `name="code"`) },
		},
		{
			name: "claim redemption",
			setup: func(t *testing.T, e *env) (*browser, string, url.Values, func() bool) {
				code := activeClaimCode(t, e, "poster-redeem")
				b := e.browser()
				form := url.Values{"csrf": {formTokenRE.FindStringSubmatch(b.get("/claim/" + code).Body)[1]}, "nickname": {"Bo"}, "email": {"bo@example.com"}}
				return b, "/claim/" + code, form, func() bool {
					pr, _ := e.app.Claims().PreviewClaim(ctx, code, "")
					return pr == nil || pr.Status != models.ClaimActive
				}
			},
			refusal: "页面已过期，请刷新后重新提交。",
			works:   func(p *page) bool { return p.Status == http.StatusOK && strings.Contains(p.Body, "领取成功") },
		},
		{
			name: "claim: first password",
			setup: func(t *testing.T, e *env) (*browser, string, url.Values, func() bool) {
				b := e.browser()
				code, ok := redeemOnPage(t, e, b, "cy@example.com")
				form := url.Values{"csrf": {formTokenRE.FindStringSubmatch(ok.Body)[1]}, "login_token": {html.UnescapeString(passwordTokenRE.FindStringSubmatch(ok.Body)[1])},
					"password": {"long enough"}, "password_confirm": {"long enough"}}
				return b, "/claim/" + code + "/password", form, func() bool {
					_, err := e.app.Auth().Authenticate(ctx, "cy@example.com", "long enough", "192.0.2.9")
					return err == nil
				}
			},
			refusal: "页面已过期，请刷新后重新提交。",
			works:   func(p *page) bool { return p.Status == http.StatusOK && strings.Contains(p.Body, `id="password-set"`) },
		},
		{
			name: "device approval",
			setup: func(t *testing.T, e *env) (*browser, string, url.Values, func() bool) {
				u := models.User{ID: models.NewID(), Email: "dee@example.com", Nickname: "dee"}
				if err := e.app.DB.Gorm.Create(&u).Error; err != nil {
					t.Fatal(err)
				}
				if err := e.app.Auth().ChangePassword(ctx, modelstest.User(u.ID), "", "correct horse"); err != nil {
					t.Fatal(err)
				}
				status, start := e.api("POST", "/api/auth/device", "", map[string]any{})
				if status != http.StatusOK {
					t.Fatalf("device start = %d %v", status, start)
				}
				userCode := start["user_code"].(string)
				b := e.browser()
				dev := b.get("/device?user_code=" + url.QueryEscape(userCode))
				form := url.Values{"csrf": {csrfRE.FindStringSubmatch(dev.Body)[1]}, "user_code": {userCode}, "action": {"approve"},
					"email": {"dee@example.com"}, "password": {"correct horse"}}
				return b, "/device", form, func() bool {
					_, err := e.app.Auth().PendingDevice(ctx, userCode)
					return err != nil // no longer pending: decided
				}
			},
			refusal: "页面已过期，请刷新后重试。",
			works: func(p *page) bool {
				return p.Status == http.StatusOK && strings.Contains(p.Body, "已授权设备登录")
			},
		},
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			e := newEnv(t)
			b, path, form, changed := f.setup(t, e)
			refused := func(what string, p *page) {
				t.Helper()
				if p.Status != http.StatusForbidden || !strings.Contains(p.Body, f.refusal) {
					t.Fatalf("%s: status %d, want 403 with %q: %s", what, p.Status, f.refusal, excerpt(p.Body))
				}
				if changed() {
					t.Fatalf("%s: the refused post changed something", what)
				}
				for _, c := range (&http.Response{Header: p.Header}).Cookies() {
					if c.Name == models.SessionCookie && c.Value != "" {
						t.Fatalf("%s: a refused post set a session cookie", what)
					}
				}
			}
			for _, x := range crossSite {
				refused(x.name, b.do(http.MethodPost, path, form, x.headers...))
			}
			noToken := url.Values{}
			for k, v := range form {
				if k != "csrf" {
					noToken[k] = v
				}
			}
			refused("no token", b.do(http.MethodPost, path, noToken, e.sameOrigin()...))
			wrong := url.Values{}
			for k, v := range form {
				wrong[k] = v
			}
			wrong.Set("csrf", "x"+form.Get("csrf"))
			refused("wrong token", b.do(http.MethodPost, path, wrong, e.sameOrigin()...))
			// The same form posted from this site's page works.
			if p := b.do(http.MethodPost, path, form, e.sameOrigin()...); !f.works(p) {
				t.Fatalf("same-origin post = %d %q: %s", p.Status, p.Location, excerpt(p.Body))
			}
			if !changed() {
				t.Fatal("the same-origin post changed nothing")
			}
		})
	}
}

// activeClaimCode creates an active claim code of a fresh tenant and platform template.
func activeClaimCode(t *testing.T, e *env, slug string) string {
	t.Helper()
	tenantID, _ := e.tenant("Acme 店铺", 50)
	tpl := e.platformTemplate("海报模板", slug)
	credits := int64(7)
	c, err := e.app.Claims().CreateClaimCode(context.Background(), modelstest.Tenant(tenantID), models.ClaimInput{TemplateIDs: []string{tpl}, Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	return c.Code
}

// TestEveryBrowserFormRouteRefusesCrossSitePosts walks every POST route of the browser surface (as
// web registers them) and posts each, with the right session and a valid token, as another site would:
// each is refused by the form guard, whatever the route does.
func TestEveryBrowserFormRouteRefusesCrossSitePosts(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	tenant := e.browser()
	tenant.signIn(key)
	admin := e.browser()
	admin.signIn(e.adminKey)
	public := e.browser()
	tokens := map[*browser]string{tenant: tenant.csrf(), admin: admin.csrf(),
		public: formTokenRE.FindStringSubmatch(public.get("/login").Body)[1]}
	code := activeClaimCode(t, e, "poster-walk")

	r := mux.NewRouter()
	web.New(e.svc.Jobs.App).Register(r)
	web.NewConsole(e.svc.Jobs.App, web.ConsoleOptions{Media: e.svc.Media}).Register(r)
	vars := regexp.MustCompile(`\{[a-z]+\}`)
	walked := 0
	_ = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		methods, err := route.GetMethods()
		tpl, terr := route.GetPathTemplate()
		if err != nil || terr != nil || !strings.Contains(strings.Join(methods, " "), http.MethodPost) {
			return nil
		}
		b := public
		switch {
		case strings.HasPrefix(tpl, "/console"), tpl == "/logout":
			b = tenant
		case strings.HasPrefix(tpl, "/admin"):
			b = admin
		}
		path := strings.Replace(tpl, "/claim/{code}", "/claim/"+code, 1)
		path = vars.ReplaceAllStringFunc(path, func(string) string { return models.NewID() })
		form := url.Values{"csrf": {tokens[b]}}
		for _, x := range crossSite {
			p := b.do(http.MethodPost, path, form, x.headers...)
			if p.Status != http.StatusForbidden || !regexp.MustCompile(`did not come from this site|This form has expired|页面已过期`).MatchString(p.Body) {
				t.Errorf("POST %s (%s) = %d, want the form guard's 403: %s", tpl, x.name, p.Status, excerpt(p.Body))
			}
		}
		walked++
		return nil
	})
	if walked < 20 {
		t.Fatalf("walked %d POST routes: the walk is broken", walked)
	}
	if pr, _ := e.app.Claims().PreviewClaim(context.Background(), code, ""); pr.Status != models.ClaimActive {
		t.Fatalf("a refused post redeemed the code: %s", pr.Status)
	}
	t.Logf("%d POST routes refuse cross-site posts", walked)
}

// TestAPIsWithAKeyAreNotBehindTheFormGuard: the REST, OpenAI-compatible and GraphQL surfaces take a key
// in a header, never a cookie, so the form guard is not in front of them: a client that sends no Origin
// (every non-browser client) works, and so does a page of another site that holds the key itself.
func TestAPIsWithAKeyAreNotBehindTheFormGuard(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	send := func(path string, body any, headers ...string) (int, string) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(string(raw)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(out)
	}
	for i, headers := range [][]string{nil, crossSite[0].headers, crossSite[2].headers} {
		email := fmt.Sprintf("api%d@example.com", i)
		if status, body := send("/api/tenant-accounts", map[string]any{"action": "create", "email": email, "nickname": "A"}, headers...); status != http.StatusOK {
			t.Errorf("REST POST with the key, headers %v = %d: %s", headers, status, body)
		}
		gql := map[string]any{"query": `mutation($e: String!) { createAccount(input: {email: $e, nickname: "G"}) { id } }`,
			"variables": map[string]any{"e": "g" + email}}
		if status, body := send("/graphql", gql, headers...); status != http.StatusOK || strings.Contains(body, `"errors"`) {
			t.Errorf("GraphQL POST with the key, headers %v = %d: %s", headers, status, body)
		}
		chat := map[string]any{"model": "service-auto", "messages": []any{map[string]any{"role": "user", "content": "hello"}}}
		if status, body := send("/api/chat/completions", chat, headers...); status != http.StatusOK {
			t.Errorf("OpenAI-compatible POST with the key, headers %v = %d: %s", headers, status, body)
		}
	}
	if accs, _ := e.app.Accounts().Accounts(context.Background(), modelstest.Tenant(mustTenant(t, e, key))); len(accs) != 6 {
		t.Fatalf("%d accounts, want 6 (3 by REST, 3 by GraphQL)", len(accs))
	}
}

// TestFormsTrustTheServiceOrigins: behind a reverse proxy the Host header may differ from the public
// URL; a browser without Sec-Fetch-Site that names {base_url} or {claim_site_url} as its Origin posts
// the forms (a default port written in the URL is not part of the origin), and another origin does not.
func TestFormsTrustTheServiceOrigins(t *testing.T) {
	e := newEnv(t, "SERVICE_BASE_URL", "http://studio.example:80", "SERVICE_CLAIM_SITE_URL", "http://claim.studio.example:8443")
	_, key := e.tenant("Acme", 10)
	b := e.browser()
	b.signIn(key)
	token := b.csrf()
	for i, origin := range []string{"http://studio.example", "http://claim.studio.example:8443"} {
		form := url.Values{"csrf": {token}, "email": {fmt.Sprintf("m%d@example.com", i)}, "mode": {"shared"}}
		if p := b.do(http.MethodPost, "/console/members", form, "Origin", origin); p.Status != http.StatusSeeOther {
			t.Errorf("Origin %s = %d, want 303: %s", origin, p.Status, excerpt(p.Body))
		}
	}
	for _, origin := range []string{"https://studio.example", "http://studio.example:8443", "http://claim.studio.example", "null"} {
		form := url.Values{"csrf": {token}, "email": {"x@example.com"}, "mode": {"shared"}}
		if p := b.do(http.MethodPost, "/console/members", form, "Origin", origin); p.Status != http.StatusForbidden {
			t.Errorf("Origin %s = %d, want 403", origin, p.Status)
		}
	}
	if accs, _ := e.app.Accounts().Accounts(context.Background(), modelstest.Tenant(mustTenant(t, e, key))); len(accs) != 2 {
		t.Fatalf("%d accounts, want the 2 of the trusted origins", len(accs))
	}
}
