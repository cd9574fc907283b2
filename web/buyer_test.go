package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"studio/models"
	"studio/models/modelstest"
)

// The buyer's journey: redeem a claim code, set a password on the success page, sign in later with the
// e-mail and the password, and approve a device (the command-line login) with it.

var (
	passwordTokenRE = regexp.MustCompile(`name="login_token" value="([^"]+)"`)
	deviceSignInRE  = regexp.MustCompile(`id="device-signin" href="([^"]+)"`)
	nextRE          = regexp.MustCompile(`name="next" value="([^"]*)"`)
)

// redeemOnPage redeems a fresh claim code through the claim page and returns the code and the success page.
func redeemOnPage(t *testing.T, e *env, b *browser, email string) (string, *page) {
	t.Helper()
	tenantID, _ := e.tenant("Acme 店铺", 50)
	tpl := e.platformTemplate("海报模板", "poster-"+strings.Split(email, "@")[0])
	credits := int64(7)
	c, err := e.app.Claims().CreateClaimCode(context.Background(), modelstest.Tenant(tenantID), models.ClaimInput{TemplateIDs: []string{tpl}, Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	form := b.get("/claim/" + c.Code)
	ok := b.post("/claim/"+c.Code, url.Values{"csrf": {formTokenRE.FindStringSubmatch(form.Body)[1]},
		"nickname": {"小博"}, "email": {email}})
	if ok.Status != http.StatusOK || !strings.Contains(ok.Body, "领取成功") {
		t.Fatalf("redeem = %d: %s", ok.Status, excerpt(ok.Body))
	}
	return c.Code, ok
}

func TestClaimBuyerSetsAPasswordSignsInAndApprovesADevice(t *testing.T) {
	e := newEnv(t)
	buyer := e.browser()
	code, ok := redeemOnPage(t, e, buyer, "bo@example.com")
	m := passwordTokenRE.FindStringSubmatch(ok.Body)
	if m == nil || !strings.Contains(ok.Body, `action="/claim/`+code+`/password"`) {
		t.Fatalf("no password form on the success page: %s", excerpt(ok.Body))
	}
	loginToken := html.UnescapeString(m[1])
	formToken := formTokenRE.FindStringSubmatch(ok.Body)[1]
	set := func(pw, confirm string) *page {
		return buyer.post("/claim/"+code+"/password", url.Values{"csrf": {formToken}, "login_token": {loginToken}, "password": {pw}, "password_confirm": {confirm}})
	}
	if p := set("long enough", "long enouhg"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "两次输入的密码不一致") {
		t.Fatalf("mismatched confirmation = %d: %s", p.Status, excerpt(p.Body))
	}
	if p := set("short", "short"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "至少 8 个字符") ||
		!strings.Contains(p.Body, `name="login_token"`) {
		t.Fatalf("short password = %d: %s", p.Status, excerpt(p.Body))
	}
	if p := buyer.post("/claim/"+code+"/password", url.Values{"csrf": {formToken}, "login_token": {"forged"}, "password": {"long enough"}, "password_confirm": {"long enough"}}); p.Status != http.StatusUnauthorized {
		t.Fatalf("forged token = %d: %s", p.Status, excerpt(p.Body))
	}
	if _, err := e.app.Auth().Authenticate(context.Background(), "bo@example.com", "long enough", "192.0.2.9"); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("a refused form set the password: %v", err)
	}
	done := set("long enough", "long enough")
	if done.Status != http.StatusOK || !strings.Contains(done.Body, `id="password-set"`) || !strings.Contains(done.Body, "bo@example.com") {
		t.Fatalf("set password = %d: %s", done.Status, excerpt(done.Body))
	}
	// Setting the password ended the redemption's token (D8): it sets no other password.
	if p := set("another password", "another password"); p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "已失效") {
		t.Fatalf("second password with the token = %d: %s", p.Status, excerpt(p.Body))
	}
	if status, _ := e.api("GET", "/api/whoami", loginToken, nil); status != http.StatusUnauthorized {
		t.Fatalf("whoami with the redemption's token after the password = %d, want 401", status)
	}
	// Redeeming again with the same e-mail no longer offers the form.
	form := buyer.get("/claim/" + code)
	again := buyer.post("/claim/"+code, url.Values{"csrf": {formTokenRE.FindStringSubmatch(form.Body)[1]}, "nickname": {"小博"}, "email": {"bo@example.com"}})
	if again.Status != http.StatusOK || strings.Contains(again.Body, `name="login_token"`) {
		t.Fatalf("redeem again after the password = %d: %s", again.Status, excerpt(again.Body))
	}

	// The command-line tool starts a device login; the buyer opens its link in a fresh browser.
	status, start := e.api("POST", "/api/auth/device", "", map[string]any{})
	if status != http.StatusOK {
		t.Fatalf("device start = %d %v", status, start)
	}
	userCode := start["user_code"].(string)
	b := e.browser()
	devicePath := "/device?user_code=" + url.QueryEscape(userCode)
	dev := b.get(devicePath)
	link := deviceSignInRE.FindStringSubmatch(dev.Body)
	if dev.Status != http.StatusOK || link == nil {
		t.Fatalf("device page without a sign-in link = %d: %s", dev.Status, excerpt(dev.Body))
	}
	signIn := b.get(html.UnescapeString(link[1]))
	next := nextRE.FindStringSubmatch(signIn.Body)
	if next == nil || html.UnescapeString(next[1]) != devicePath {
		t.Fatalf("sign-in page keeps next %v, want %q", next, devicePath)
	}
	res := b.post("/login", url.Values{"csrf": {formTokenRE.FindStringSubmatch(signIn.Body)[1]}, "method": {"password"},
		"next": {html.UnescapeString(next[1])}, "email": {"Bo@example.com"}, "password": {"long enough"}})
	if res.Status != http.StatusSeeOther || res.Location != devicePath {
		t.Fatalf("password sign-in = %d to %q, want 303 to %q: %s", res.Status, res.Location, devicePath, excerpt(res.Body))
	}
	// Signed in already, the sign-in page sends the browser straight back to the device page.
	if p := b.get(html.UnescapeString(link[1])); p.Status != http.StatusSeeOther || p.Location != devicePath {
		t.Fatalf("sign-in page when signed in = %d to %q", p.Status, p.Location)
	}
	dev = b.get(res.Location)
	if !strings.Contains(dev.Body, "已登录： <strong>bo@example.com</strong>") {
		t.Fatalf("device page after sign-in: %s", excerpt(dev.Body))
	}
	// The same session opens the console, where the claimed template is offered to generate from.
	if p := b.get("/console/jobs?make=template"); p.Status != http.StatusOK || !strings.Contains(p.Body, "海报模板") {
		t.Fatalf("buyer's template choice = %d: %s", p.Status, excerpt(p.Body))
	}
	approved := b.post("/device", url.Values{"csrf": {csrfRE.FindStringSubmatch(dev.Body)[1]}, "user_code": {userCode}, "action": {"approve"}})
	if approved.Status != http.StatusOK || !strings.Contains(approved.Body, "已授权设备登录") {
		t.Fatalf("approve = %d: %s", approved.Status, excerpt(approved.Body))
	}
	status, tok := e.api("POST", "/api/auth/device/token", "", map[string]any{"device_code": start["device_code"],
		"grant_type": "urn:ietf:params:oauth:grant-type:device_code"})
	if status != http.StatusOK || tok["access_token"] == nil {
		t.Fatalf("device token = %d %v", status, tok)
	}
	status, who := e.api("GET", "/api/whoami", tok["access_token"].(string), nil)
	if status != http.StatusOK || who["email"] != "bo@example.com" || who["credits"].(float64) != 7 {
		t.Fatalf("whoami of the device = %d %v", status, who)
	}

	// The e-mail and password also approve on the device page itself, without a console session.
	_, start2 := e.api("POST", "/api/auth/device", "", map[string]any{})
	other := e.browser()
	page2 := other.get("/device?user_code=" + url.QueryEscape(start2["user_code"].(string)))
	ok2 := other.post("/device", url.Values{"csrf": {csrfRE.FindStringSubmatch(page2.Body)[1]}, "user_code": {start2["user_code"].(string)},
		"action": {"approve"}, "email": {"bo@example.com"}, "password": {"long enough"}})
	if ok2.Status != http.StatusOK || !strings.Contains(ok2.Body, "已授权设备登录") {
		t.Fatalf("approve with e-mail and password = %d: %s", ok2.Status, excerpt(ok2.Body))
	}
}

func TestSignInReturnsOnlyToLocalPages(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 5)
	for next, want := range map[string]string{
		"/device?user_code=BCDF-GHJK": "/device?user_code=BCDF-GHJK",
		"/console/jobs?status=done":   "/console/jobs?status=done",
		"/devices":                    "/console",
		"//evil.example/device":       "/console",
		"https://evil.example/":       "/console",
	} {
		b := e.browser()
		p := b.get("/login?next=" + url.QueryEscape(next))
		res := b.post("/login", url.Values{"csrf": {formTokenRE.FindStringSubmatch(p.Body)[1]}, "method": {"key"}, "key": {key}, "next": {next}})
		if res.Status != http.StatusSeeOther || res.Location != want {
			t.Errorf("next %q: %d to %q, want %q", next, res.Status, res.Location, want)
		}
	}
}

func TestClaimSuccessPageSpeaksPlainChinese(t *testing.T) {
	e := newEnv(t)
	_, ok := redeemOnPage(t, e, e.browser(), "cy@example.com")
	// The steps a buyer reads come before the collapsed sections and carry no API jargon.
	main, collapsed, found := strings.Cut(ok.Body, `<details`)
	if !found {
		t.Fatalf("no collapsed section on the success page: %s", excerpt(ok.Body))
	}
	visible := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(main, " ")
	for _, jargon := range []string{"Bearer", "/api/", "GET ", "token", "studio login", "API"} {
		if strings.Contains(visible, jargon) {
			t.Errorf("the buyer's part of the page says %q", jargon)
		}
	}
	for _, step := range []string{"设置登录密码", "如何登录", "邮箱 <strong>cy@example.com</strong>", "登录页"} {
		if !strings.Contains(main, step) {
			t.Errorf("the buyer's steps miss %q", step)
		}
	}
	// The integrator's hint is kept, collapsed, under 开发者.
	if !strings.Contains(collapsed, "<summary>开发者</summary>") || !strings.Contains(collapsed, "Authorization: Bearer") ||
		!strings.Contains(collapsed, "GET /api/claims") || strings.Contains(collapsed, "<details open") {
		t.Fatalf("collapsed sections: %s", excerpt(collapsed))
	}
}

func TestBuyerWithoutAPasswordSignsInWithAnEmailedCode(t *testing.T) {
	sink := modelstest.NewSMTPSink(t)
	e := newEnv(t, "SERVICE_SMTP_URL", sink.URL)
	redeemOnPage(t, e, e.browser(), "dee@example.com") // the buyer leaves without setting a password

	_, start := e.api("POST", "/api/auth/device", "", map[string]any{})
	userCode := start["user_code"].(string)
	devicePath := "/device?user_code=" + url.QueryEscape(userCode)
	b := e.browser()
	link := deviceSignInRE.FindStringSubmatch(b.get(devicePath).Body)
	signIn := b.get(html.UnescapeString(link[1]))
	codeLink := regexp.MustCompile(`id="code-link" href="([^"]+)"`).FindStringSubmatch(signIn.Body)
	if codeLink == nil || html.UnescapeString(codeLink[1]) != "/login/code?next="+url.QueryEscape(devicePath) {
		t.Fatalf("sign-in page code link %v", codeLink)
	}
	codePage := b.get(html.UnescapeString(codeLink[1]))
	token := formTokenRE.FindStringSubmatch(codePage.Body)[1]
	next := html.UnescapeString(nextRE.FindStringSubmatch(codePage.Body)[1])
	if next != devicePath {
		t.Fatalf("code page keeps next %q, want %q", next, devicePath)
	}
	// An address without an account gets the same answer, and an e-mail without a code.
	if p := b.post("/login/code", url.Values{"csrf": {token}, "next": {next}, "step": {"send"}, "email": {"nobody@example.com"}}); p.Status != 200 ||
		!strings.Contains(p.Body, "a six-digit code is on its way") {
		t.Fatalf("unknown address = %d: %s", p.Status, excerpt(p.Body))
	}
	if m := sink.Next(t, "nobody@example.com"); signInCodeRE.MatchString(m) || !strings.Contains(m, "no studio account") {
		t.Fatalf("the e-mail to an address without an account: %s", m)
	}
	sent := b.post("/login/code", url.Values{"csrf": {token}, "next": {next}, "step": {"send"}, "email": {"Dee@example.com"}})
	if sent.Status != 200 || !strings.Contains(sent.Body, `name="code"`) {
		t.Fatalf("send code = %d: %s", sent.Status, excerpt(sent.Body))
	}
	code := sink.LastCode(t, "dee@example.com", signInCodeRE)
	reset := func(code, pw string) *page {
		return b.post("/login/code", url.Values{"csrf": {token}, "next": {next}, "step": {"reset"}, "email": {"dee@example.com"},
			"code": {code}, "password": {pw}, "password_confirm": {pw}})
	}
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	if p := reset(wrong, "a fine password"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "wrong sign-in code") {
		t.Fatalf("wrong code = %d: %s", p.Status, excerpt(p.Body))
	}
	res := reset(code, "a fine password")
	if res.Status != http.StatusSeeOther || res.Location != devicePath {
		t.Fatalf("reset = %d to %q, want 303 to %q: %s", res.Status, res.Location, devicePath, excerpt(res.Body))
	}
	dev := b.get(res.Location)
	approved := b.post("/device", url.Values{"csrf": {csrfRE.FindStringSubmatch(dev.Body)[1]}, "user_code": {userCode}, "action": {"approve"}})
	if approved.Status != http.StatusOK || !strings.Contains(approved.Body, "已授权设备登录") {
		t.Fatalf("approve = %d: %s", approved.Status, excerpt(approved.Body))
	}
	if _, err := e.app.Auth().Authenticate(context.Background(), "dee@example.com", "a fine password", "192.0.2.9"); err != nil {
		t.Fatalf("the new password does not sign in: %v", err)
	}
}

var signInCodeRE = regexp.MustCompile(`sign-in code is (\d{6})`)

// TestDevicePageOffersTheCodeForAccountsWithoutAPassword: a buyer without a password who opens the link
// of `studio login` finds, on /device itself, the way to get a code by e-mail that returns to this
// device code; and the page does not send someone who can approve right there to sign in "first".
func TestDevicePageOffersTheCodeForAccountsWithoutAPassword(t *testing.T) {
	e := newEnv(t)
	_, start := e.api("POST", "/api/auth/device", "", map[string]any{})
	devicePath := "/device?user_code=" + url.QueryEscape(start["user_code"].(string))
	p := e.browser().get(devicePath)
	link := regexp.MustCompile(`id="device-code" href="([^"]+)"`).FindStringSubmatch(p.Body)
	if p.Status != 200 || link == nil || html.UnescapeString(link[1]) != "/login/code?next="+url.QueryEscape(devicePath) {
		t.Fatalf("device page = %d, code link %v: %s", p.Status, link, excerpt(p.Body))
	}
	if strings.Contains(p.Body, "first</a>") || !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("the device page asks to sign in elsewhere first although it takes the password: %s", excerpt(p.Body))
	}
}
