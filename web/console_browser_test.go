package web_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

// Browser tests: Debian's headless Chromium driven by chromedp against a real server. They are skipped
// when Chromium is absent, unless CI=true, where its absence fails them. Each saves a full-page
// screenshot in its temporary directory (and, when SCREENSHOT_DIR is set, a copy there) and logs the path.

// chromiumPath returns the Chromium binary, or skips (fails under CI) when there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install -y chromium); browser tests are required under CI")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium): skipping the browser test")
	return ""
}

// newChrome starts a headless Chromium with a fresh profile and returns a context of its first tab.
func newChrome(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	watchConsole(t, ctx)
	return ctx
}

// watchConsole fails the test, when it ends, if the page logged a content-security-policy violation
// or a script error: the pages must work under their policy, with no inline script or style.
func watchConsole(t *testing.T, ctx context.Context) {
	t.Helper()
	entries := chromedp.Events(ctx, cdplog.EntryAdded)
	exceptions := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the log: %v", err)
	}
	var mu sync.Mutex
	var problems []string
	note := func(s string) {
		mu.Lock()
		problems = append(problems, s)
		mu.Unlock()
	}
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			if e := ev.Entry; e != nil && (e.Source == cdplog.EntrySourceSecurity || e.Source == cdplog.EntrySourceJavascript ||
				strings.Contains(e.Text, "Content Security Policy")) {
				note(string(e.Source) + ": " + e.Text)
			}
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			if ev.ExceptionDetails != nil {
				note("exception: " + ev.ExceptionDetails.Text)
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("browser console: %s", p)
		}
	})
}

// run runs browser steps in order with a time limit, failing the test on error.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		shot(t, ctx, "failure")
		t.Fatalf("%s: %v", what, err)
	}
}

// read runs one browser action that returns a value, with a time limit, failing the test on error.
func read[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, a)
	if err != nil {
		shot(t, ctx, "failure")
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// submit runs steps that end in a navigation (a form submission, a link) and waits until the next
// page has loaded; it returns the HTTP status of that page.
func submit(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) int64 {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := chromedp.RunResponse(tctx, steps...)
	if err != nil {
		shot(t, ctx, "failure")
		t.Fatalf("%s: %v", what, err)
	}
	return res.Status
}

// shot saves a full-page screenshot and logs its path.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := strings.ReplaceAll(t.Name(), "/", "_") + "-" + name + ".png"
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
	if dir := os.Getenv("SCREENSHOT_DIR"); dir != "" {
		keep := filepath.Join(dir, file)
		if err := os.WriteFile(keep, png, 0o644); err == nil {
			t.Logf("screenshot kept: %s", keep)
		}
	}
}

// signInWithKey signs the browser in through the sign-in form.
func signInWithKey(t *testing.T, ctx context.Context, base, key string) {
	t.Helper()
	run(t, ctx, "open the sign-in page",
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		chromedp.SetValue(chromedp.CSS(`#key`), key),
	)
	if status := submit(t, ctx, "sign in", chromedp.Click(chromedp.CSS(`form:has(#key) button[type=submit]`))); status != 200 {
		t.Fatalf("signed-in page = %d", status)
	}
}

// text reads the trimmed text of a visible element.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(read(t, ctx, "read "+sel, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible)))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return read(t, ctx, "evaluate "+expr, chromedp.Evaluate[T](expr))
}

func TestBrowserTemplateEditorWithSelectField(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 20)
	ctx := newChrome(t)
	signInWithKey(t, ctx, e.srv.URL, key)
	if got := text(t, ctx, "#pool-balance"); got != "20" {
		t.Fatalf("dashboard balance = %q, want 20", got)
	}
	if bars := eval[int](t, ctx, `document.querySelectorAll('figure.chart svg rect.bar').length`); bars != models.UsageDefaultDays {
		t.Fatalf("usage chart has %d bars, want %d", bars, models.UsageDefaultDays)
	}
	shot(t, ctx, "dashboard")

	run(t, ctx, "fill the editor",
		chromedp.Navigate(e.srv.URL+"/console/templates/new"),
		chromedp.WaitVisible(chromedp.CSS(`#zh_name`)),
		chromedp.SetValue(chromedp.CSS(`#zh_name`), "节日海报"),
		chromedp.SendKeys(chromedp.CSS(`#slug`), "acme-poster"),
		chromedp.SetValue(chromedp.CSS(`#prompt_template`), "a poster of {subject} in {style}"),
		chromedp.SendKeys(chromedp.CSS(`#f0-key`), "subject"),
		chromedp.SendKeys(chromedp.CSS(`#f0-label`), "Subject"),
		chromedp.Click(chromedp.CSS(`button[value="add-field"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#field-rows .field-row:nth-child(2)`)),
	)
	if rows := eval[int](t, ctx, `document.querySelectorAll('#field-rows .field-row').length`); rows != 2 {
		t.Fatalf("field rows after Add a field = %d, want 2 (added in place)", rows)
	}
	second := `#field-rows .field-row:nth-child(2) `
	run(t, ctx, "fill the select field",
		chromedp.SendKeys(chromedp.CSS(second+`input[name=field_key]`), "style"),
		chromedp.SendKeys(chromedp.CSS(second+`input[name=field_label]`), "Style"),
		chromedp.SetValue(chromedp.CSS(second+`select[name=field_type]`), "select"),
		chromedp.SetValue(chromedp.CSS(second+`textarea[name=field_options]`), "oil|Oil painting\nwatercolor|Watercolor"),
	)
	shot(t, ctx, "editor")
	submit(t, ctx, "save", chromedp.Click(chromedp.CSS(`button[value="save"]`)))
	if got := text(t, ctx, "main .notice"); got != "Template saved." {
		t.Fatalf("notice after saving = %q", got)
	}
	options := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#in-style option')).map(o => o.value + '=' + o.textContent)`)
	if strings.Join(options, ",") != "=Choose…,oil=Oil painting,watercolor=Watercolor" {
		t.Fatalf("select options in the preview form = %v", options)
	}
	run(t, ctx, "preview",
		chromedp.SendKeys(chromedp.CSS(`#in-subject`), "a fox"),
		chromedp.SetValue(chromedp.CSS(`#in-style`), "watercolor"),
		chromedp.Click(chromedp.CSS(`form[action$="/preview"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#preview-prompt`)),
	)
	if got := text(t, ctx, "#preview-prompt"); got != "a poster of a fox in watercolor" {
		t.Fatalf("preview = %q", got)
	}
	shot(t, ctx, "preview")
	id, _ := e.app.Auth().ResolveIdentity(context.Background(), key)
	tpls, err := e.app.Templates().ListTemplates(context.Background(), id, models.TemplateFilter{Source: models.SourceMine})
	if err != nil || len(tpls) != 1 || tpls[0].ZhName != "节日海报" || *tpls[0].Slug != "acme-poster" {
		t.Fatalf("stored templates = %+v, %v", tpls, err)
	}
	cfg := fmt.Sprintf("%+v", tpls[0].GenerationConfigs)
	if !strings.Contains(cfg, "select") || !strings.Contains(cfg, "oil") {
		t.Fatalf("stored config lacks the select field: %s", cfg)
	}
}

func TestBrowserMembersAndClaimCodeRedemption(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme 店铺", 100)
	tplID := e.platformTemplate("品牌海报", "brand-poster")
	ctx := newChrome(t)
	signInWithKey(t, ctx, e.srv.URL, key)

	// A member, then its quota.
	run(t, ctx, "create a member",
		chromedp.Navigate(e.srv.URL+"/console/members"),
		chromedp.WaitVisible(chromedp.CSS(`#member-email`)),
		chromedp.SendKeys(chromedp.CSS(`#member-email`), "mia@example.com"),
		chromedp.SendKeys(chromedp.CSS(`#member-nickname`), "Mia"),
	)
	submit(t, ctx, "create a member", chromedp.Click(chromedp.CSS(`form[action="/console/members"] button[type=submit]`)))
	memberKey := read(t, ctx, "new key", chromedp.Value(chromedp.CSS(`#new-key`)))
	if !strings.HasPrefix(memberKey, models.KeyPrefix) {
		t.Fatalf("new member key = %q", memberKey)
	}
	member := `article[data-member="mia@example.com"] `
	run(t, ctx, "set the quota",
		chromedp.Click(chromedp.CSS(member+`input[name=mode][value=dedicated]`)),
		chromedp.SetValue(chromedp.CSS(member+`input[name=credits]`), "5"),
	)
	submit(t, ctx, "submit the quota", chromedp.Click(chromedp.CSS(member+`fieldset button[type=submit]`)))
	if got := text(t, ctx, "main .notice"); got != "Quota updated." {
		t.Fatalf("notice = %q", got)
	}
	if got := text(t, ctx, member+".member-quota"); got != "dedicated, 5 credits" {
		t.Fatalf("member quota = %q, want dedicated, 5 credits", got)
	}
	if got := text(t, ctx, "#members-spendable"); got != "95" {
		t.Fatalf("spendable after the quota = %q, want 95", got)
	}
	if status, bal := e.api("GET", "/api/balance", memberKey, nil); status != 200 || bal["credits"].(float64) != 5 {
		t.Fatalf("member balance = %d %v, want 5", status, bal)
	}
	shot(t, ctx, "members")

	// A claim code from the administrator's platform template.
	run(t, ctx, "create a claim code",
		chromedp.Navigate(e.srv.URL+"/console/claims"),
		chromedp.WaitVisible(chromedp.CSS(`#claim-credits`)),
		chromedp.Click(chromedp.CSS(`input[name=template_id][value="`+tplID+`"]`)),
		chromedp.SetValue(chromedp.CSS(`#claim-credits`), "7"),
		chromedp.SendKeys(chromedp.CSS(`#claim-note`), "order 42"),
		chromedp.SendKeys(chromedp.CSS(`#claim-pdf`), "https://example.com/tutorial.pdf"),
	)
	submit(t, ctx, "submit the claim code", chromedp.Click(chromedp.CSS(`form[action="/console/claims"] button[type=submit]`)))
	claimURL := read(t, ctx, "claim url", chromedp.AttributeValue(chromedp.CSS(`#created-url`), "href")).Value
	reply := read(t, ctx, "reply text", chromedp.Value(chromedp.CSS(`#reply-text`)))
	if !strings.HasPrefix(claimURL, e.app.Config.ClaimSiteURL+"/claim/promo-") || !strings.Contains(reply, claimURL) {
		t.Fatalf("claim url %q, reply text %q", claimURL, reply)
	}
	if got := text(t, ctx, `#claim-codes tbody tr .claim-status`); got != "active" {
		t.Fatalf("listed code status = %q", got)
	}
	shot(t, ctx, "claim-created")

	// The buyer opens the link in a fresh browser context, redeems, and signs in with the token.
	buyer, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	defer cancel()
	if err := chromedp.Do(buyer); err != nil { // opens the tab for the life of buyer, not of one step
		t.Fatalf("new browser context: %v", err)
	}
	watchConsole(t, buyer)
	run(t, buyer, "open the claim page",
		chromedp.Navigate(claimURL),
		chromedp.WaitVisible(chromedp.CSS(`#nickname`)),
	)
	if got := text(t, buyer, "#claim-credits"); got != "7" {
		t.Fatalf("claim page credits = %q", got)
	}
	lang := eval[string](t, buyer, `document.documentElement.lang`)
	samples := eval[int](t, buyer, `document.querySelectorAll('.tiles img').length`)
	if lang != "zh-CN" || samples != 1 {
		t.Fatalf("claim page lang %q with %d sample images", lang, samples)
	}
	shot(t, buyer, "claim-page")
	run(t, buyer, "redeem",
		chromedp.SetValue(chromedp.CSS(`#nickname`), "小博"),
		chromedp.SendKeys(chromedp.CSS(`#claim-email`), "bo@example.com"),
	)
	if status := submit(t, buyer, "submit the claim", chromedp.Click(chromedp.CSS(`form[action^="/claim/"] button[type=submit]`))); status != 200 {
		t.Fatalf("redeem = %d", status)
	}
	token := read(t, buyer, "token", chromedp.Value(chromedp.CSS(`#login-token`)))
	tutorial := read(t, buyer, "tutorial", chromedp.AttributeValue(chromedp.CSS(`#tutorial-link`), "href")).Value
	if got := text(t, buyer, "#granted-credits"); got != "7" || token == "" || tutorial != "https://example.com/tutorial.pdf" {
		t.Fatalf("success page: credits %q, token %q, tutorial %q", got, token, tutorial)
	}
	shot(t, buyer, "claim-redeemed")
	if status, bal := e.api("GET", "/api/balance", token, nil); status != 200 || bal["credits"].(float64) != 7 {
		t.Fatalf("buyer balance over the API = %d %v, want 7", status, bal)
	}
	submit(t, buyer, "follow the sign-in link", chromedp.Click(chromedp.CSS(`#login-link`)))
	run(t, buyer, "paste the token", chromedp.SetValue(chromedp.CSS(`#key`), token))
	submit(t, buyer, "sign in as the buyer", chromedp.Click(chromedp.CSS(`form:has(#key) button[type=submit]`)))
	if got := text(t, buyer, "#balance-credits"); got != "7" {
		t.Fatalf("buyer's console balance = %q, want 7", got)
	}
	shot(t, buyer, "buyer-dashboard")

	// The tenant's list now shows the code as used.
	run(t, ctx, "codes list again", chromedp.Navigate(e.srv.URL+"/console/claims"), chromedp.WaitVisible(chromedp.CSS(`#claim-codes`)))
	if got := text(t, ctx, `#claim-codes tbody tr .claim-status .badge`); got != "used" {
		t.Fatalf("listed code status after redemption = %q", got)
	}
}

func TestBrowserJobProgressUpdatesLive(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	e.fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: 2500 * time.Millisecond})
	ctx := newChrome(t)
	signInWithKey(t, ctx, e.srv.URL, key)
	run(t, ctx, "submit a job",
		chromedp.Navigate(e.srv.URL+"/console/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`#prompt`)),
		chromedp.SendKeys(chromedp.CSS(`#prompt`), "a red fox in the snow"),
	)
	submit(t, ctx, "submit the job", chromedp.Click(chromedp.CSS(`form[action="/console/jobs"] button[type=submit]`)))
	if got := text(t, ctx, `#job-rows tr:first-child .job-status`); got != "pending" {
		t.Fatalf("status after submitting = %q, want pending", got)
	}
	eval[bool](t, ctx, `window.studioNoReload = true`)
	shot(t, ctx, "pending")
	run(t, ctx, "wait for done without reloading",
		chromedp.Poll[chromedp.Void](`document.querySelector('#job-rows tr:first-child .job-status').textContent.trim() === 'done'`,
			chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)),
		chromedp.WaitVisible(chromedp.CSS(`#job-rows tr:first-child .job-result img`)),
	)
	if !eval[bool](t, ctx, `window.studioNoReload === true`) {
		t.Fatal("the page was reloaded: the status must change through the event stream")
	}
	if got := text(t, ctx, "#live-note"); !strings.HasPrefix(got, "Live") {
		t.Fatalf("live note = %q", got)
	}
	shot(t, ctx, "done")
}

func TestBrowserSignInDeviceAndMobileClaimPages(t *testing.T) {
	e := newEnv(t)
	tenantID, _ := e.tenant("Acme 店铺", 20)
	tpl := e.platformTemplate("品牌海报", "brand-poster")
	credits := int64(3)
	code, err := e.app.Claims().CreateClaimCode(context.Background(), modelstest.Tenant(tenantID), models.ClaimInput{TemplateIDs: []string{tpl}, Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	ctx := newChrome(t)
	// The stylesheet applies under the content security policy: buttons take the accent colour.
	accent := `getComputedStyle(document.querySelector('button[type=submit]')).backgroundColor`
	for _, page := range []struct{ name, path string }{{"sign-in", "/login"}, {"device", "/device?user_code=BCDF-GHJK"}} {
		run(t, ctx, "open "+page.name, chromedp.Navigate(e.srv.URL+page.path), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
		if got := eval[string](t, ctx, accent); got != "rgb(11, 87, 208)" {
			t.Fatalf("%s page: button colour %q: the stylesheet did not apply", page.name, got)
		}
		if got := eval[string](t, ctx, `document.documentElement.lang`); got != "en" {
			t.Fatalf("%s page lang = %q", page.name, got)
		}
		shot(t, ctx, page.name)
	}
	// The claim page fits a phone's width.
	run(t, ctx, "phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(e.srv.URL+"/claim/"+code.Code),
		chromedp.WaitVisible(chromedp.CSS(`#nickname`)),
	)
	if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Fatalf("claim page is %d px wide on a 390 px phone", w)
	}
	shot(t, ctx, "claim-phone")
}

func TestBrowserJobResultsVisibleOnAPhone(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("Acme", 10)
	if status, out := e.api("POST", "/api/generate", key, map[string]any{"prompt": "a lighthouse at night"}); status != 200 {
		t.Fatalf("generate = %d %v", status, out)
	}
	waitFor(t, "the job", 10*time.Second, func() bool {
		page, err := e.app.Jobs().Jobs(context.Background(), &models.Identity{Kind: models.IdentityTenant, TenantID: tenantID}, "done", "", 20)
		return err == nil && len(page.Jobs) == 1
	})
	ctx := newChrome(t)
	signInWithKey(t, ctx, e.srv.URL, key)
	run(t, ctx, "open the jobs page on a phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(e.srv.URL+"/console/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`#job-rows tr:first-child .job-result img`)),
	)
	shot(t, ctx, "jobs-phone")
	inView := `(() => {
		const r = document.querySelector('#job-rows tr:first-child .job-result img').getBoundingClientRect();
		return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= window.innerWidth;
	})()`
	if !eval[bool](t, ctx, inView) {
		rect := eval[string](t, ctx, `JSON.stringify(document.querySelector('#job-rows tr:first-child .job-result img').getBoundingClientRect())`)
		t.Fatalf("the result is outside a 390 px wide screen: %s (viewport %d px)", rect, eval[int](t, ctx, `window.innerWidth`))
	}
	if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Fatalf("the jobs page is %d px wide on a 390 px phone", w)
	}
	if got := text(t, ctx, `#job-rows tr:first-child .job-status`); !strings.Contains(got, "done") {
		t.Fatalf("status on a phone = %q", got)
	}
}
