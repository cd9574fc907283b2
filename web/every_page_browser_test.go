package web_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"studio/models"
	"studio/models/modelstest"
)

// pageWatch collects, for one browser tab, every console error (any source: CSP, an invalid pattern,
// scripts), every uncaught exception and every failed request (a 4xx or 5xx answer to a subresource,
// the icon included, or a load that failed).
type pageWatch struct {
	mu       sync.Mutex
	problems []string
}

func (w *pageWatch) note(s string) {
	w.mu.Lock()
	w.problems = append(w.problems, s)
	w.mu.Unlock()
}

// take returns and forgets what was noted.
func (w *pageWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.problems
	w.problems = nil
	return out
}

// watchEverything starts collecting on ctx's tab.
func watchEverything(t *testing.T, ctx context.Context) *pageWatch {
	t.Helper()
	w := &pageWatch{}
	entries := chromedp.Events(ctx, cdplog.EntryAdded)
	exceptions := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	console := chromedp.Events(ctx, cdpruntime.ConsoleAPICalled)
	responses := chromedp.Events(ctx, network.ResponseReceived)
	failures := chromedp.Events(ctx, network.LoadingFailed)
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the log: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("enable the network domain: %v", err)
	}
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			// A failed load is reported by the network events below, which tell a page's own status
			// (an unknown claim code is a 404 page) from a failed subresource.
			if e := ev.Entry; e != nil && e.Source != cdplog.EntrySourceNetwork && (e.Level == cdplog.EntryLevelError || e.Source == cdplog.EntrySourceSecurity ||
				strings.Contains(e.Text, "Content Security Policy") || strings.Contains(e.Text, "pattern")) {
				w.note(fmt.Sprintf("console %s %s: %s (%s)", e.Source, e.Level, e.Text, e.URL))
			}
		}
	}()
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == cdpruntime.ConsoleAPICalledTypeError || ev.Type == cdpruntime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				w.note("console." + string(ev.Type) + ": " + strings.Join(args, " "))
			}
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			if ev.ExceptionDetails != nil {
				w.note("exception: " + ev.ExceptionDetails.Text)
			}
		}
	}()
	go func() {
		for ev, err := range responses {
			if err != nil {
				return
			}
			if ev.Type != network.ResourceTypeDocument && ev.Response != nil && ev.Response.Status >= 400 {
				w.note(fmt.Sprintf("%s %s answered %d", ev.Type, ev.Response.URL, ev.Response.Status))
			}
		}
	}()
	go func() {
		for ev, err := range failures {
			if err != nil {
				return
			}
			if !ev.Canceled && ev.Type != network.ResourceTypeEventSource {
				w.note(fmt.Sprintf("%s request failed: %s %s", ev.Type, ev.ErrorText, ev.BlockedReason))
			}
		}
	}()
	return w
}

// overflowJS lists the visible elements that reach beyond the viewport's width, outside the scroll
// boxes meant for wide tables (and the skip link, which waits off screen until focused).
const overflowJS = `(() => {
	const vw = document.documentElement.clientWidth, out = [];
	for (const el of document.querySelectorAll('body *')) {
		if (el.closest('.scroll, .skip, .visually-hidden, details:not([open])')) continue;
		const r = el.getBoundingClientRect();
		if (r.width === 0 || r.height === 0) continue;
		if (r.right > vw + 1 || r.left < -1) out.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '') + ' [' + Math.round(r.left) + ', ' + Math.round(r.right) + ']');
	}
	if (document.documentElement.scrollWidth > vw) out.push('document ' + document.documentElement.scrollWidth + ' px wide');
	return out.slice(0, 8);
})()`

// TestBrowserEveryPage opens every console, administrator, claim and device page, at desktop width and
// on a 390 px phone, for each kind of identity that can see it, and fails on any console error (a CSP
// violation, an invalid pattern attribute), any failed request (a missing icon included) and any
// element wider than the screen. It also checks in Chromium that the slug input refuses what the server
// refuses, and that Deny does not look like Approve.
func TestBrowserEveryPage(t *testing.T) {
	e := newEnv(t)
	tenantID, tenantKey := e.tenant("Acme 店铺", 50)
	tpl := e.platformTemplate("品牌海报", "brand-poster")
	credits := int64(3)
	code, err := e.app.Claims().CreateClaimCode(context.Background(), modelstest.Tenant(tenantID), models.ClaimInput{TemplateIDs: []string{tpl}, Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	status, acc := e.api("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "create", "email": "mia@example.com", "nickname": "Mia"})
	if status != 200 {
		t.Fatalf("member = %d %v", status, acc)
	}
	memberKey := acc["account"].(map[string]any)["api_key"].(string)
	status, dev := e.api("POST", "/api/auth/device", "", map[string]any{})
	if status != 200 {
		t.Fatalf("device start = %d %v", status, dev)
	}
	devicePath := "/device?user_code=" + url.QueryEscape(dev["user_code"].(string))
	// A buyer: redeems a code over the claim page's form, then signs in with the login token.
	anonClient := e.browser()
	_, success := redeemOnPage(t, e, anonClient, "bo@example.com")
	token := loginTokenRE.FindStringSubmatch(success.Body)
	if token == nil {
		t.Fatal("no login token")
	}
	tplPath := "/admin/templates/" + tpl

	root := newChrome(t)
	type identity struct {
		name, key string
		pages     []string
	}
	identities := []identity{
		{"anonymous", "", []string{"/login", "/login/code", "/login/code?next=%2Fdevice", devicePath, "/claim/" + code.Code, "/claim/promo-unknown"}},
		{"tenant", tenantKey, []string{"/console", "/console/jobs", "/console/jobs?make=template", "/console/jobs?make=video",
			"/console/jobs?make=copy", "/console/templates", "/console/templates/new", "/console/templates/new?type=article",
			"/console/hooks", "/console/members", "/console/claims", "/console/settings"}},
		{"member", memberKey, []string{"/console", "/console/jobs", "/console/jobs?make=video", "/console/templates"}},
		{"buyer", unescapeHTML(token[1]), []string{"/console", "/console/jobs", "/console/jobs?make=template", "/console/jobs?make=video",
			"/console/jobs?make=copy", "/console/templates", devicePath}},
		{"administrator", e.adminKey, []string{"/admin", "/admin/upstreams", "/admin/claims", "/admin/invitations",
			"/admin/templates", "/admin/templates/new", tplPath}},
	}
	for _, id := range identities {
		ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
		if err := chromedp.Do(ctx); err != nil {
			t.Fatalf("new browser context: %v", err)
		}
		w := watchEverything(t, ctx)
		if id.key != "" {
			signInWithKey(t, ctx, e.srv.URL, id.key)
		}
		for _, width := range []int64{1280, 390} {
			opts := []chromedp.EmulateViewportOption{}
			if width < 500 {
				opts = append(opts, chromedp.EmulateMobile)
			}
			run(t, ctx, "viewport", chromedp.EmulateViewport(width, 844, opts...))
			for _, path := range id.pages {
				what := fmt.Sprintf("%s %s at %d px", id.name, path, width)
				run(t, ctx, "open "+what, chromedp.Navigate(e.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
				// Let late requests (the icon, lazy images) finish before reading the watch.
				run(t, ctx, "settle "+what, chromedp.Poll[chromedp.Void](`document.readyState === 'complete'`))
				if over := eval[[]string](t, ctx, overflowJS); len(over) > 0 {
					shot(t, ctx, strings.NewReplacer("/", "_", "?", "_").Replace(id.name+path)+fmt.Sprint(width))
					t.Errorf("%s: wider than the screen: %v", what, over)
				}
				run(t, ctx, "settle", chromedp.Sleep(150*time.Millisecond))
				for _, p := range w.take() {
					t.Errorf("%s: %s", what, p)
				}
			}
		}
		if id.name == "tenant" {
			checkSlugInput(t, ctx, e.srv.URL)
		}
		if id.name == "anonymous" {
			checkDenyButton(t, ctx, e.srv.URL+devicePath)
		}
		for _, p := range w.take() {
			t.Errorf("%s: %s", id.name, p)
		}
		cancel()
	}
}

// checkSlugInput types slugs into the editor's slug input and compares Chromium's verdict with the
// server's rule: a pattern the browser cannot compile is skipped by it and would accept everything.
func checkSlugInput(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	run(t, ctx, "open the editor", chromedp.Navigate(base+"/console/templates/new"), chromedp.WaitVisible(chromedp.CSS(`#slug`)))
	server := regexpSlug()
	for _, s := range []string{"acme-poster", "ab", "0-9", "-ab", "Ab", "a_b", "a", "a b", strings.Repeat("a", 65)} {
		ok := eval[bool](t, ctx, fmt.Sprintf(`(() => { const i = document.querySelector('#slug'); i.value = %q; return i.checkValidity(); })()`, s))
		if ok != server.MatchString(s) {
			t.Errorf("slug %q: the browser says valid=%v, the server %v", s, ok, server.MatchString(s))
		}
	}
}

// checkDenyButton compares the computed look of Approve and Deny on the device page.
func checkDenyButton(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	run(t, ctx, "open the device page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`button[value=deny]`)))
	look := `(sel => { const s = getComputedStyle(document.querySelector(sel)); return s.backgroundColor + ' ' + s.color + ' ' + s.borderColor; })`
	approve := eval[string](t, ctx, look+`('button[value=approve]')`)
	deny := eval[string](t, ctx, look+`('button[value=deny]')`)
	if approve == deny {
		t.Errorf("Deny looks like Approve: %s", deny)
	}
	shot(t, ctx, "device")
}

// unescapeHTML undoes the HTML escaping of a text value.
func unescapeHTML(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&amp;", "&", "&lt;", "<", "&gt;", ">", "&#39;", "'").Replace(s)
}
