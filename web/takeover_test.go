package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"studio/models"
	"studio/models/modelstest"
)

// Nobody gets into an account that is not theirs (docs/security.md): a claim redemption never signs in
// to an account that existed before it (D8), a password set with an e-mailed code ends every earlier
// login, the password lockout does not keep the owner out of the e-mailed-code path, and the forms do
// not tell which addresses have accounts. Every step goes through the real HTTP surface.

// buyerWithPassword makes an account the way a buyer does (redeem on the REST surface, set the first
// password with the redemption's token) and returns its e-mail.
func buyerWithPassword(t *testing.T, e *env, tenantKey, email, password string) {
	t.Helper()
	code := claimCode(t, e, tenantKey, 3)
	status, red := e.api("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "owner", "email": email})
	if status != http.StatusOK || red["token"] == nil || red["sign_in_required"] != false {
		t.Fatalf("first redemption for a new address = %d %v: want a token", status, red)
	}
	status, out := e.api("POST", "/api/auth/password", red["token"].(string), map[string]any{"old_password": "", "new_password": password})
	if status != http.StatusOK {
		t.Fatalf("first password = %d %v", status, out)
	}
}

// claimCode makes a claim code of credits through the REST surface with the tenant's key.
func claimCode(t *testing.T, e *env, tenantKey string, credits int) string {
	t.Helper()
	tpl := e.platformTemplate("海报模板", "poster-"+models.NewID()[:8])
	status, c := e.api("POST", "/api/tenant-claims", tenantKey, map[string]any{"template_ids": []string{tpl}, "credits": credits})
	if status != http.StatusOK {
		t.Fatalf("create claim code = %d %v", status, c)
	}
	return c["code"].(string)
}

// login signs in with the password on the REST surface and returns the token (or the status when refused).
func login(e *env, email, password string) (int, string) {
	status, out := e.api("POST", "/api/auth/login", "", map[string]any{"email": email, "password": password})
	tok, _ := out["token"].(string)
	return status, tok
}

func credits(t *testing.T, e *env, email string) int64 {
	t.Helper()
	u, err := e.app.Accounts().UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.Credits
}

func TestRedemptionNeverSignsInToAnAccountThatExistedBefore(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme 店铺", 100)
	buyerWithPassword(t, e, tenantKey, "victim@example.com", "victim password")
	status, victimToken := login(e, "victim@example.com", "victim password")
	if status != http.StatusOK {
		t.Fatalf("victim login = %d", status)
	}
	before := credits(t, e, "victim@example.com")

	// An attacker with a 1-credit code of its own redeems it with the victim's e-mail: the credit is
	// granted, but the answer carries no token.
	code := claimCode(t, e, tenantKey, 1)
	status, red := e.api("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "attacker", "email": "Victim@Example.com"})
	if status != http.StatusOK || red["token"] != nil || red["token_expires_at"] != nil || red["sign_in_required"] != true {
		t.Fatalf("redemption for an existing account = %d %v: want no token and sign_in_required", status, red)
	}
	if got := credits(t, e, "victim@example.com"); got != before+1 {
		t.Fatalf("victim credits = %d, want %d", got, before+1)
	}
	// Again with the same code and e-mail: the same grant, still no token.
	status, again := e.api("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "attacker", "email": "victim@example.com"})
	if status != http.StatusOK || again["token"] != nil || again["sign_in_required"] != true {
		t.Fatalf("repeated redemption = %d %v: want no token", status, again)
	}
	// The console's claim page follows the same rule: no password form, no token, a sign-in notice.
	pageCode := claimCode(t, e, tenantKey, 1)
	b := e.browser()
	form := b.get("/claim/" + pageCode)
	p := b.post("/claim/"+pageCode, url.Values{"csrf": {formTokenRE.FindStringSubmatch(form.Body)[1]},
		"nickname": {"attacker"}, "email": {"victim@example.com"}})
	if p.Status != http.StatusOK || strings.Contains(p.Body, `name="login_token"`) || strings.Contains(p.Body, `id="login-token"`) ||
		!strings.Contains(p.Body, `id="sign-in-required"`) {
		t.Fatalf("claim page for an existing account = %d: %s", p.Status, excerpt(p.Body))
	}
	if b.get("/console/jobs").Status == http.StatusOK {
		t.Fatal("the claim page signed the browser in to the victim's account")
	}
	// The victim's password and token keep working; the attacker holds nothing that signs in.
	if status, _ := login(e, "victim@example.com", "victim password"); status != http.StatusOK {
		t.Fatalf("victim password after the redemptions = %d", status)
	}
	if status, who := e.api("GET", "/api/whoami", victimToken, nil); status != http.StatusOK || who["credits"].(float64) != float64(before+2) {
		t.Fatalf("victim whoami = %d %v", status, who)
	}
}

func TestTheRedemptionTokenComesOnceAndEndsWithTheFirstPassword(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme 店铺", 100)
	code := claimCode(t, e, tenantKey, 2)
	status, red := e.api("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "bo", "email": "bo@example.com"})
	if status != http.StatusOK || red["token"] == nil || red["sign_in_required"] != false {
		t.Fatalf("redemption for a new address = %d %v", status, red)
	}
	token := red["token"].(string)
	// Someone who knows the code and the e-mail redeems again: no token, so no way to set the password first.
	if status, again := e.api("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "x", "email": "bo@example.com"}); status != http.StatusOK || again["token"] != nil {
		t.Fatalf("repeated redemption = %d %v", status, again)
	}
	if status, _ := e.api("GET", "/api/claims", token, nil); status != http.StatusOK {
		t.Fatalf("the buyer's token before the password = %d", status)
	}
	if status, out := e.api("POST", "/api/auth/password", token, map[string]any{"old_password": "", "new_password": "bo's password"}); status != http.StatusOK {
		t.Fatalf("first password = %d %v", status, out)
	}
	if status, _ := e.api("GET", "/api/claims", token, nil); status != http.StatusUnauthorized {
		t.Fatalf("the redemption's token after the first password = %d, want 401", status)
	}
	if status, _ := e.api("POST", "/api/auth/password", token, map[string]any{"old_password": "", "new_password": "another one"}); status != http.StatusUnauthorized {
		t.Fatalf("a second first password with the token = %d, want 401", status)
	}
	if status, _ := login(e, "bo@example.com", "bo's password"); status != http.StatusOK {
		t.Fatalf("login with the first password = %d", status)
	}
}

func TestAPasswordSetWithAnEmailedCodeEndsEveryLogin(t *testing.T) {
	sink := modelstest.NewSMTPSink(t)
	e := newEnv(t, "SERVICE_SMTP_URL", sink.URL)
	_, tenantKey := e.tenant("Acme 店铺", 100)
	buyerWithPassword(t, e, tenantKey, "owner@example.com", "first password")
	_, token := login(e, "owner@example.com", "first password")

	// A console session opened with the password.
	console := e.browser()
	signIn := console.get("/login")
	res := console.post("/login", url.Values{"csrf": {formTokenRE.FindStringSubmatch(signIn.Body)[1]}, "method": {"password"},
		"email": {"owner@example.com"}, "password": {"first password"}})
	if res.Status != http.StatusSeeOther || console.get("/console/jobs").Status != http.StatusOK {
		t.Fatalf("password sign-in = %d", res.Status)
	}
	// Two device logins: one collected (a 7-day token), one approved and not collected yet.
	device := func() (string, string) {
		_, start := e.api("POST", "/api/auth/device", "", map[string]any{})
		dev := console.get("/device?user_code=" + url.QueryEscape(start["user_code"].(string)))
		ok := console.post("/device", url.Values{"csrf": {csrfRE.FindStringSubmatch(dev.Body)[1]}, "user_code": {start["user_code"].(string)}, "action": {"approve"}})
		if ok.Status != http.StatusOK {
			t.Fatalf("approve = %d: %s", ok.Status, excerpt(ok.Body))
		}
		return start["device_code"].(string), start["user_code"].(string)
	}
	poll := func(deviceCode string) (int, map[string]any) {
		return e.api("POST", "/api/auth/device/token", "", map[string]any{"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": deviceCode})
	}
	collected, _ := device()
	status, tok := poll(collected)
	if status != http.StatusOK {
		t.Fatalf("device token = %d %v", status, tok)
	}
	deviceToken := tok["access_token"].(string)
	pending, _ := device()

	// The owner (or whoever reads the mailbox) sets a new password with an e-mailed code.
	b := e.browser()
	page := b.get("/login/code")
	ft := formTokenRE.FindStringSubmatch(page.Body)[1]
	if p := b.post("/login/code", url.Values{"csrf": {ft}, "step": {"send"}, "email": {"owner@example.com"}}); p.Status != http.StatusOK {
		t.Fatalf("send code = %d", p.Status)
	}
	code := sink.LastCode(t, "owner@example.com", signInCodeRE)
	reset := b.post("/login/code", url.Values{"csrf": {ft}, "step": {"reset"}, "email": {"owner@example.com"}, "code": {code},
		"password": {"second password"}, "password_confirm": {"second password"}})
	if reset.Status != http.StatusSeeOther {
		t.Fatalf("reset = %d: %s", reset.Status, excerpt(reset.Body))
	}
	for name, tok := range map[string]string{"login token": token, "device token": deviceToken} {
		if status, _ := e.api("GET", "/api/whoami", tok, nil); status != http.StatusUnauthorized {
			t.Errorf("%s after the reset = %d, want 401", name, status)
		}
	}
	if p := console.get("/console/jobs"); p.Status == http.StatusOK {
		t.Error("the console session opened before the reset still works")
	}
	if status, out := poll(pending); status != http.StatusBadRequest || out["error"] != models.DeviceAccessDenied {
		t.Errorf("device login approved before the reset = %d %v, want access_denied", status, out)
	}
	if status, _ := login(e, "owner@example.com", "first password"); status != http.StatusUnauthorized {
		t.Errorf("the old password = %d, want 401", status)
	}
	if b.get("/console/jobs").Status != http.StatusOK {
		t.Error("the reset did not sign its own browser in")
	}
}

func TestWrongPasswordsDoNotKeepTheOwnerOutOfTheEmailedCode(t *testing.T) {
	sink := modelstest.NewSMTPSink(t)
	e := newEnv(t, "SERVICE_SMTP_URL", sink.URL)
	_, tenantKey := e.tenant("Acme 店铺", 100)
	buyerWithPassword(t, e, tenantKey, "owner@example.com", "owner password")
	locked := false
	for i := 0; i < 30 && !locked; i++ {
		status, _ := login(e, "owner@example.com", fmt.Sprintf("guess %d", i))
		locked = status == http.StatusTooManyRequests
	}
	if !locked {
		t.Fatal("30 wrong passwords were not limited")
	}
	if status, _ := login(e, "owner@example.com", "owner password"); status != http.StatusTooManyRequests {
		t.Fatalf("the owner's password during the lockout = %d, want 429", status)
	}
	b := e.browser()
	ft := formTokenRE.FindStringSubmatch(b.get("/login/code").Body)[1]
	b.post("/login/code", url.Values{"csrf": {ft}, "step": {"send"}, "email": {"owner@example.com"}})
	code := sink.LastCode(t, "owner@example.com", signInCodeRE)
	reset := b.post("/login/code", url.Values{"csrf": {ft}, "step": {"reset"}, "email": {"owner@example.com"}, "code": {code},
		"password": {"owner's new password"}, "password_confirm": {"owner's new password"}})
	if reset.Status != http.StatusSeeOther || b.get("/console/jobs").Status != http.StatusOK {
		t.Fatalf("sign-in with an e-mailed code during the lockout = %d: %s", reset.Status, excerpt(reset.Body))
	}
	// Signing in with the code lifts the lockout of the address.
	if status, _ := login(e, "owner@example.com", "owner's new password"); status != http.StatusOK {
		t.Fatalf("the new password after the code = %d, want 200", status)
	}
}

func TestWrongSignInCodesSpendTheCode(t *testing.T) {
	sink := modelstest.NewSMTPSink(t)
	e := newEnv(t, "SERVICE_SMTP_URL", sink.URL)
	_, tenantKey := e.tenant("Acme 店铺", 100)
	buyerWithPassword(t, e, tenantKey, "owner@example.com", "owner password")
	b := e.browser()
	ft := formTokenRE.FindStringSubmatch(b.get("/login/code").Body)[1]
	b.post("/login/code", url.Values{"csrf": {ft}, "step": {"send"}, "email": {"owner@example.com"}})
	code := sink.LastCode(t, "owner@example.com", signInCodeRE)
	reset := func(c string) *page {
		return b.post("/login/code", url.Values{"csrf": {ft}, "step": {"reset"}, "email": {"owner@example.com"}, "code": {c},
			"password": {"a new password"}, "password_confirm": {"a new password"}})
	}
	n := 0
	for guess := 0; n < 5; guess++ {
		if g := fmt.Sprintf("%06d", guess); g != code {
			if p := reset(g); p.Status != http.StatusBadRequest {
				t.Fatalf("wrong code %s = %d", g, p.Status)
			}
			n++
		}
	}
	if p := reset(code); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "ask for a new sign-in code") {
		t.Fatalf("the right code after 5 wrong ones = %d: %s", p.Status, excerpt(p.Body))
	}
	b.post("/login/code", url.Values{"csrf": {ft}, "step": {"send"}, "email": {"owner@example.com"}})
	if p := reset(sink.LastCode(t, "owner@example.com", signInCodeRE)); p.Status != http.StatusSeeOther {
		t.Fatalf("a fresh code = %d: %s", p.Status, excerpt(p.Body))
	}
}

func TestTheFormsDoNotTellWhichAddressesHaveAccounts(t *testing.T) {
	sink := modelstest.NewSMTPSink(t)
	e := newEnv(t, "SERVICE_SMTP_URL", sink.URL)
	_, tenantKey := e.tenant("Acme 店铺", 100)
	buyerWithPassword(t, e, tenantKey, "known@example.com", "known password")

	// The mail server holds every message: a request that sent its e-mail itself would hang here.
	release := sink.Hold()
	defer release()
	answer := func(path, email string) string {
		done := make(chan string, 1)
		go func() {
			status, out := e.api("POST", path, "", map[string]any{"email": email})
			done <- fmt.Sprint(status, out)
		}()
		select {
		case got := <-done:
			return got
		case <-time.After(10 * time.Second):
			t.Fatalf("%s for %s waited for the mail server", path, email)
			return ""
		}
	}
	known, unknown := answer("/api/auth/register/code", "known@example.com"), answer("/api/auth/register/code", "unknown@example.com")
	if known != unknown || !strings.HasPrefix(known, "200") {
		t.Fatalf("register/code: known address %s, unknown %s: want the same 200", known, unknown)
	}
	// Registering with a wrong code answers alike too.
	reg := func(email string) string {
		status, out := e.api("POST", "/api/auth/register", "", map[string]any{"email": email, "password": "a password", "code": "123456", "invitation_code": "x"})
		return fmt.Sprint(status, strings.ReplaceAll(fmt.Sprint(out["error"]), email, "<email>"))
	}
	if k, u := reg("known@example.com"), reg("unknown@example.com"); k != u {
		t.Fatalf("register with a wrong code: known %s, unknown %s", k, u)
	}
	// The console's sign-in-by-code form: the same page for both.
	b := e.browser()
	ft := formTokenRE.FindStringSubmatch(b.get("/login/code").Body)[1]
	send := func(email string) string {
		p := b.post("/login/code", url.Values{"csrf": {ft}, "step": {"send"}, "email": {email}})
		return fmt.Sprint(p.Status, strings.ReplaceAll(p.Body, email, "<email>"))
	}
	if k, u := send("known@example.com"), send("unknown@example.com"); k != u {
		t.Fatalf("sign-in code page differs: known and unknown addresses")
	}
	release()
	// Each address got its e-mails afterwards: codes only where they can be used.
	if m := sink.Next(t, "known@example.com"); codeInMail(m) {
		t.Fatalf("register/code for a known address e-mailed a code: %s", m)
	}
	if m := sink.Next(t, "unknown@example.com"); !codeInMail(m) {
		t.Fatalf("register/code for a new address e-mailed no code: %s", m)
	}
	if m := sink.Next(t, "known@example.com"); !signInCodeRE.MatchString(m) {
		t.Fatalf("sign-in code for a known address: %s", m)
	}
	if m := sink.Next(t, "unknown@example.com"); signInCodeRE.MatchString(m) {
		t.Fatalf("sign-in code for an unknown address: %s", m)
	}
}

// codeInMail reports whether an e-mail holds a six-digit code.
func codeInMail(m string) bool {
	return strings.Contains(m, "registration code is ") || signInCodeRE.MatchString(m)
}

func TestClaimLimitIsOneForEverySurface(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	// Guesses on the REST surface use up the address's redemptions ...
	for i := 0; i < models.ClaimRedeemsPerAddress; i++ {
		status, out := e.api("POST", "/api/promo-claims", "", map[string]any{"code": fmt.Sprintf("promo-guess%d", i), "nickname": "x", "email": "x@example.com"})
		if status != http.StatusNotFound {
			t.Fatalf("guess %d = %d %v, want 404", i, status, out)
		}
	}
	// ... and the console's claim form counts the same.
	_, tenantKey := e.tenant("Acme 店铺", 100)
	code := claimCode(t, e, tenantKey, 1)
	form := b.get("/claim/" + code)
	p := b.post("/claim/"+code, url.Values{"csrf": {formTokenRE.FindStringSubmatch(form.Body)[1]}, "nickname": {"x"}, "email": {"x@example.com"}})
	if p.Status != http.StatusTooManyRequests || !strings.Contains(p.Body, "尝试次数过多") {
		t.Fatalf("claim page after the limit = %d: %s", p.Status, excerpt(html.UnescapeString(p.Body)))
	}
	if status, _ := e.api("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "x", "email": "x@example.com"}); status != http.StatusTooManyRequests {
		t.Fatalf("REST after the limit = %d, want 429", status)
	}
}
