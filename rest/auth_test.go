package rest_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"studio/models"
	"studio/models/modelstest"
	"studio/models/oidc"
)

// ---- a stand-in SMTP server ----

// smtpSink keeps the e-mails the service sends.
type smtpSink struct{ *modelstest.SMTPSink }

// withSMTP starts an smtpSink and points SERVICE_SMTP_URL at it.
func withSMTP(t *testing.T) (*smtpSink, envOption) {
	t.Helper()
	s := modelstest.NewSMTPSink(t)
	return &smtpSink{s}, withVar("SERVICE_SMTP_URL", s.URL)
}

var codeRE = regexp.MustCompile(`code is (\d{6})`)

// lastCode returns the code of the latest message sent to email.
func (s *smtpSink) lastCode(t *testing.T, email string) string {
	t.Helper()
	return s.LastCode(t, email, codeRE)
}

// invitation makes one platform invitation code.
func (e *env) invitation() string {
	e.t.Helper()
	return e.admin(map[string]any{"action": "invitation-create"}).JSON["codes"].([]any)[0].(string)
}

// register runs the whole e-mail registration and returns the login token.
func (e *env) register(sink *smtpSink, email, password string) string {
	e.t.Helper()
	e.call("POST", "/api/auth/register/code", "", map[string]any{"email": email}).expect(e.t, 200)
	r := e.call("POST", "/api/auth/register", "", map[string]any{"email": email, "password": password,
		"code": sink.lastCode(e.t, email), "invitation_code": e.invitation(), "nickname": "Me"}).expect(e.t, 200)
	return r.str("token")
}

func TestRegisterByEmailCodeAndInvitation(t *testing.T) {
	sink, smtp := withSMTP(t)
	e := newEnv(t, smtp)
	e.call("POST", "/api/auth/register/code", "", map[string]any{"email": " New@Example.com "}).expect(t, 200)
	code := sink.lastCode(t, "new@example.com")
	inv := e.invitation()
	body := func(change map[string]any) map[string]any {
		b := map[string]any{"email": "new@example.com", "password": "correct horse", "code": code, "invitation_code": inv, "nickname": "New"}
		for k, v := range change {
			b[k] = v
		}
		return b
	}
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	for _, c := range []struct {
		name   string
		change map[string]any
		status int
		want   string
	}{
		{"wrong code", map[string]any{"code": wrong}, 400, "wrong verification code"},
		{"weak password", map[string]any{"password": "short"}, 400, "at least 8"},
		{"unknown invitation", map[string]any{"invitation_code": "inv-nope"}, 400, "unknown invitation"},
		{"no invitation", map[string]any{"invitation_code": ""}, 400, "invitation_code is required"},
		{"bad e-mail", map[string]any{"email": "not-an-address"}, 400, "not a valid e-mail"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/auth/register", "", body(c.change)).expect(t, c.status)
			if !strings.Contains(r.str("error"), c.want) {
				t.Fatalf("error = %q, want it to mention %q", r.str("error"), c.want)
			}
		})
	}
	// A failed registration consumed neither the code nor the invitation.
	r := e.call("POST", "/api/auth/register", "", body(nil)).expect(t, 200)
	user := r.JSON["user"].(map[string]any)
	if r.str("token") == "" || user["email"] != "new@example.com" || user["nickname"] != "New" || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("register = %s", r.Body)
	}
	exp, _ := time.Parse(time.RFC3339, r.str("expires_at"))
	if d := time.Until(exp); d < models.LoginTTL-time.Minute || d > models.LoginTTL+time.Minute {
		t.Fatalf("expires_at %v is not 7 days away", exp)
	}
	var stored models.User
	e.app.DB.Gorm.First(&stored, "email = ?", "new@example.com")
	if !strings.HasPrefix(stored.PasswordHash, "$2") || strings.Contains(stored.PasswordHash, "correct horse") {
		t.Fatalf("password stored as %q, want a bcrypt hash", stored.PasswordHash)
	}
	var codes []models.EmailCode
	e.app.DB.Gorm.Find(&codes)
	for _, c := range codes {
		if strings.Contains(c.CodeHash, code) {
			t.Fatal("the e-mail code is stored in clear")
		}
	}

	// Reused code, reused invitation, duplicate e-mail.
	e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "second@example.com"}).expect(t, 200)
	second := sink.lastCode(t, "second@example.com")
	r = e.call("POST", "/api/auth/register", "", map[string]any{"email": "second@example.com", "password": "password2",
		"code": second, "invitation_code": inv}).expect(t, 400)
	if !strings.Contains(r.str("error"), "invitation code was already used") {
		t.Fatalf("reused invitation: %s", r.Body)
	}
	e.call("POST", "/api/auth/register", "", map[string]any{"email": "second@example.com", "password": "password2",
		"code": second, "invitation_code": e.invitation()}).expect(t, 200)
	// The code is checked before the address: a spent code says so, whether or not the address has an account.
	e.call("POST", "/api/auth/register", "", map[string]any{"email": "second@example.com", "password": "password2",
		"code": second, "invitation_code": e.invitation()}).expect(t, 400)
	e.app.DB.Gorm.Where("email = ?", "second@example.com").Delete(&models.User{})
	r = e.call("POST", "/api/auth/register", "", map[string]any{"email": "second@example.com", "password": "password2",
		"code": second, "invitation_code": e.invitation()}).expect(t, 400)
	if !strings.Contains(r.str("error"), "already used") {
		t.Fatalf("reused code: %s", r.Body)
	}
	// A known address gets the same answer as any other, and an e-mail without a code (nothing tells the
	// caller which addresses have accounts).
	e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "new@example.com"}).expect(t, 200)
	if m := sink.Next(t, "new@example.com"); codeRE.MatchString(m) || !strings.Contains(m, "already") {
		t.Fatalf("the e-mail to an address with an account: %s", m)
	}

	// An expired code.
	e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "late@example.com"}).expect(t, 200)
	late := sink.lastCode(t, "late@example.com")
	start := time.Now()
	e.app.Now = func() time.Time { return start.Add(models.EmailCodeTTL + time.Second).UTC() }
	r = e.call("POST", "/api/auth/register", "", map[string]any{"email": "late@example.com", "password": "password3",
		"code": late, "invitation_code": e.invitation()}).expect(t, 400)
	if !strings.Contains(r.str("error"), "expired") {
		t.Fatalf("expired code: %s", r.Body)
	}
}

func TestRegistrationCodesAreRateLimited(t *testing.T) {
	_, smtp := withSMTP(t)
	e := newEnv(t, smtp)
	for i := 0; i < 5; i++ {
		e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "a@example.com"}).expect(t, 200)
	}
	r := e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "a@example.com"}).expect(t, 429)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Per client address: 20 an hour whatever the e-mail (5 already counted).
	for i := 0; i < 15; i++ {
		e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "b" + string(rune('a'+i)) + "@example.com"}).expect(t, 200)
	}
	e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "other@example.com"}).expect(t, 429)
}

func TestWithoutSMTPAndOIDC(t *testing.T) {
	e := newEnv(t)
	e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "log@example.com"}).expect(t, 200)
	e.call("POST", "/api/auth/register/code", "", map[string]any{"email": "nope"}).expect(t, 400)
	r := e.browse(e.browser(), "GET", "/api/auth/oidc/start").expect(t, 404)
	if !strings.Contains(r.str("error"), "not configured") {
		t.Fatalf("oidc start without a provider: %s", r.Body)
	}
	e.browse(e.browser(), "GET", "/api/auth/oidc/callback?state=a&code=b").expect(t, 404)
}

func TestLoginPasswordAndWhoami(t *testing.T) {
	sink, smtp := withSMTP(t)
	e := newEnv(t, smtp)
	e.register(sink, "me@example.com", "first password")
	e.call("POST", "/api/auth/login", "", map[string]any{"email": "me@example.com", "password": "wrong password"}).expect(t, 401)
	unknown := e.call("POST", "/api/auth/login", "", map[string]any{"email": "nobody@example.com", "password": "first password"}).expect(t, 401)
	wrong := e.call("POST", "/api/auth/login", "", map[string]any{"email": "me@example.com", "password": "nope nope"}).expect(t, 401)
	if unknown.str("error") != wrong.str("error") {
		t.Fatalf("unknown e-mail and wrong password answer differently: %q vs %q", unknown.str("error"), wrong.str("error"))
	}
	e.call("POST", "/api/auth/login", "", map[string]any{"email": "me@example.com"}).expect(t, 400)
	r := e.call("POST", "/api/auth/login", "", map[string]any{"email": "ME@example.com", "password": "first password"}).expect(t, 200)
	tok := r.str("token")

	w := e.callH("GET", "/api/whoami", map[string]string{"Authorization": "Bearer " + tok}, nil).expect(t, 200)
	if w.str("email") != "me@example.com" || w.str("nickname") != "Me" || w.num("credits") != 0 || w.str("id") == "" {
		t.Fatalf("whoami = %s", w.Body)
	}
	_, tenantKey := e.tenant("Acme", 10)
	_, accountKey := e.member(tenantKey, map[string]any{"action": "create", "email": "m@acme.test", "nickname": "M"})
	for _, k := range []string{tenantKey, accountKey, e.adminKey} {
		e.call("GET", "/api/whoami", k, nil).expect(t, 403)
		e.call("POST", "/api/auth/password", k, map[string]any{"old_password": "x", "new_password": "yyyyyyyy"}).expect(t, 403)
	}
	e.call("GET", "/api/whoami", "", nil).expect(t, 401)

	e.call("POST", "/api/auth/password", tok, map[string]any{"old_password": "not it at all", "new_password": "second password"}).expect(t, 403)
	e.call("POST", "/api/auth/password", tok, map[string]any{"old_password": "first password", "new_password": "short"}).expect(t, 400)
	e.call("POST", "/api/auth/password", tok, map[string]any{"old_password": "first password", "new_password": "second password"}).expect(t, 200)
	e.call("POST", "/api/auth/login", "", map[string]any{"email": "me@example.com", "password": "first password"}).expect(t, 401)
	r = e.call("POST", "/api/auth/login", "", map[string]any{"email": "me@example.com", "password": "second password"}).expect(t, 200)

	// The login JWT expires after exactly 7 days on the service clock.
	tok = r.str("token")
	start := time.Now()
	e.app.Now = func() time.Time { return start.Add(models.LoginTTL - time.Minute).UTC() }
	e.call("GET", "/api/whoami", tok, nil).expect(t, 200)
	e.app.Now = func() time.Time { return start.Add(models.LoginTTL + time.Minute).UTC() }
	if r := e.call("GET", "/api/whoami", tok, nil).expect(t, 401); !strings.Contains(r.str("error"), "expired") {
		t.Fatalf("expired login: %s", r.Body)
	}
}

func TestLoginAttemptsAreLimitedPerEmail(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 20; i++ {
		e.call("POST", "/api/auth/login", "", map[string]any{"email": "x@example.com", "password": "guess guess"}).expect(t, 401)
	}
	r := e.call("POST", "/api/auth/login", "", map[string]any{"email": "x@example.com", "password": "guess guess"}).expect(t, 429)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
}

// TestPersonalLoginCapabilities: a login made by registration generates with its own credits, creates
// personal templates and sees only its own jobs.
func TestPersonalLoginCapabilities(t *testing.T) {
	_, fake := fakeUpstreams(t)
	sink, smtp := withSMTP(t)
	e := newEnv(t, fake, smtp)
	me := e.register(sink, "me@example.com", "my password")
	other := e.register(sink, "other@example.com", "my password")
	e.admin(map[string]any{"action": "user-credit", "email": "me@example.com", "credits": 3})
	_, tenantKey := e.tenant("Acme", 10)

	t.Run("generates with its own credits", func(t *testing.T) {
		r := e.call("POST", "/api/generate", me, map[string]any{"prompt": "mine"}).expect(t, 200)
		if b := e.call("GET", "/api/balance", me, nil); b.num("credits") != 2 {
			t.Fatalf("credits after one image = %v, want 2", b.num("credits"))
		}
		if b := e.call("GET", "/api/balance", tenantKey, nil); b.num("credits") != 10 {
			t.Fatalf("a tenant was charged: %s", b.Body)
		}
		e.call("POST", "/api/generate", other, map[string]any{"prompt": "broke"}).expect(t, 402)
		e.waitJob(me, r.str("jobId"))
	})
	t.Run("creates personal templates", func(t *testing.T) {
		e.tplCreate("/api/templates", me, tplSpec("image", "mine-only", "# mine"))
		if rows := e.tplRows("/api/templates?source=mine", me); rows["mine-only"] == nil {
			t.Fatalf("personal template not listed as mine: %v", rows)
		}
		if rows := e.tplRows("/api/templates", other); rows["mine-only"] != nil {
			t.Fatal("another login sees my template")
		}
	})
	t.Run("sees only its own jobs", func(t *testing.T) {
		e.call("POST", "/api/generate", tenantKey, map[string]any{"prompt": "tenant job"}).expect(t, 200)
		mine := e.call("GET", "/api/jobs", me, nil).expect(t, 200).JSON["jobs"].([]any)
		if len(mine) != 1 {
			t.Fatalf("my jobs = %d, want 1", len(mine))
		}
		if theirs := e.call("GET", "/api/jobs", other, nil).expect(t, 200).JSON["jobs"].([]any); len(theirs) != 0 {
			t.Fatalf("other login sees %d jobs", len(theirs))
		}
		e.call("GET", "/api/jobs?id="+mine[0].(map[string]any)["jobId"].(string), other, nil).expect(t, 404)
	})
}

// ---- device authorization ----

// browser is an HTTP client with cookies that does not follow redirects.
func (e *env) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// devicePage fetches the approval page and returns its HTML and CSRF token.
func (e *env) devicePage(b *http.Client, userCode string) (string, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/device?user_code="+url.QueryEscape(userCode), nil)
	req.Header.Set("Accept-Language", "en") // the page speaks the browser's language (Chinese by default)
	res, err := b.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), "text/html") || res.Header.Get("X-Frame-Options") != "DENY" {
		e.t.Fatalf("GET /device = %d %v\n%s", res.StatusCode, res.Header, body)
	}
	m := csrfRE.FindStringSubmatch(string(body))
	if m == nil {
		e.t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return string(body), m[1]
}

// submitDevice posts the approval form and returns the status and page.
func (e *env) submitDevice(b *http.Client, form url.Values) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/device", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept-Language", "en")
	res, err := b.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(body)
}

func TestDeviceAuthorizationFlow(t *testing.T) {
	sink, smtp := withSMTP(t)
	e := newEnv(t, smtp)
	e.register(sink, "me@example.com", "my password")
	start := e.call("POST", "/api/auth/device", "", nil).expect(t, 200)
	userCode, deviceCode := start.str("user_code"), start.str("device_code")
	if !regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`).MatchString(userCode) ||
		start.num("interval") != 5 || start.num("expires_in") != 600 ||
		start.str("verification_uri") != e.app.Config.BaseURL+"/device" ||
		start.str("verification_uri_complete") != start.str("verification_uri")+"?user_code="+userCode {
		t.Fatalf("device start = %s", start.Body)
	}
	var row models.DeviceAuthorization
	e.app.DB.Gorm.First(&row, "user_code = ?", userCode)
	if row.DeviceCodeHash == deviceCode || row.DeviceCodeHash != models.HashKey(deviceCode) {
		t.Fatal("the device code is not stored hashed")
	}

	now := time.Now().UTC()
	e.app.Now = func() time.Time { return now }
	poll := func(want int, wantErr string) *resp {
		t.Helper()
		r := e.call("POST", "/api/auth/device/token", "", map[string]any{"device_code": deviceCode}).expect(t, want)
		if wantErr != "" && r.str("error") != wantErr {
			t.Fatalf("poll error = %s, want %s", r.Body, wantErr)
		}
		return r
	}
	poll(400, "authorization_pending")
	poll(400, "slow_down")
	e.app.DB.Gorm.First(&row, "user_code = ?", userCode)
	if row.Interval != 10 {
		t.Fatalf("interval after slow_down = %d, want 10", row.Interval)
	}
	now = now.Add(6 * time.Second) // past the first interval, within the new one: 15 s from now on
	poll(400, "slow_down")
	e.app.DB.Gorm.First(&row, "user_code = ?", userCode)
	if row.Interval != 15 {
		t.Fatalf("interval after two slow_downs = %d, want 15", row.Interval)
	}
	now = now.Add(16 * time.Second)
	poll(400, "authorization_pending")

	// The person approves on the page: the form needs the CSRF token, then the right password.
	b := e.browser()
	page, csrf := e.devicePage(b, strings.ToLower(strings.ReplaceAll(userCode, "-", "")))
	if !strings.Contains(page, `value="`+userCode+`"`) || !strings.Contains(page, `<label for="password">`) {
		t.Fatalf("page does not show the code and a labelled password field:\n%s", page)
	}
	form := url.Values{"user_code": {userCode}, "email": {"me@example.com"}, "password": {"my password"}, "action": {"approve"}}
	if status, _ := e.submitDevice(b, form); status != 403 {
		t.Fatalf("POST without CSRF token = %d, want 403", status)
	}
	form.Set("csrf", csrf)
	form.Set("password", "wrong password")
	if status, body := e.submitDevice(b, form); status != 401 || !strings.Contains(body, "wrong e-mail or password") {
		t.Fatalf("wrong password = %d\n%s", status, body)
	}
	form.Set("password", "my password")
	if status, body := e.submitDevice(b, form); status != 200 || !strings.Contains(body, "Device approved") {
		t.Fatalf("approve = %d\n%s", status, body)
	}
	if status, _ := e.submitDevice(b, form); status != 409 {
		t.Fatalf("approving again = %d, want 409", status)
	}

	now = now.Add(16 * time.Second)
	tok := e.callH("POST", "/api/auth/device/token", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		"grant_type="+url.QueryEscape("urn:ietf:params:oauth:grant-type:device_code")+"&device_code="+deviceCode).expect(t, 200)
	if tok.str("token_type") != "Bearer" || tok.num("expires_in") != models.LoginTTL.Seconds() || tok.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token = %s", tok.Body)
	}
	if w := e.call("GET", "/api/whoami", tok.str("access_token"), nil).expect(t, 200); w.str("email") != "me@example.com" {
		t.Fatalf("whoami with the device token = %s", w.Body)
	}
	now = now.Add(20 * time.Second)
	poll(400, "invalid_grant") // consumed: never a second token

	e.call("POST", "/api/auth/device/token", "", map[string]any{"device_code": "nope"}).expect(t, 400)
	e.call("POST", "/api/auth/device/token", "", map[string]any{"device_code": deviceCode, "grant_type": "password"}).expect(t, 400)
}

func TestDeviceAuthorizationDeniedAndExpired(t *testing.T) {
	e := newEnv(t)
	denied := e.call("POST", "/api/auth/device", "", nil).expect(t, 200)
	b := e.browser()
	_, csrf := e.devicePage(b, denied.str("user_code"))
	status, body := e.submitDevice(b, url.Values{"csrf": {csrf}, "user_code": {denied.str("user_code")}, "action": {"deny"}})
	if status != 200 || !strings.Contains(body, "Request denied") {
		t.Fatalf("deny = %d\n%s", status, body)
	}
	r := e.call("POST", "/api/auth/device/token", "", map[string]any{"device_code": denied.str("device_code")}).expect(t, 400)
	if r.str("error") != "access_denied" {
		t.Fatalf("denied poll = %s", r.Body)
	}

	expired := e.call("POST", "/api/auth/device", "", nil).expect(t, 200)
	start := time.Now()
	e.app.Now = func() time.Time { return start.Add(models.DeviceCodeTTL + time.Second).UTC() }
	r = e.call("POST", "/api/auth/device/token", "", map[string]any{"device_code": expired.str("device_code")}).expect(t, 400)
	if r.str("error") != "expired_token" {
		t.Fatalf("expired poll = %s", r.Body)
	}
	res, err := b.Get(e.srv.URL + "/device?user_code=" + expired.str("user_code"))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(page), "expired") {
		t.Fatalf("page for an expired code = %d\n%s", res.StatusCode, page)
	}
}

// ---- third-party sign-in ----

// oidcProvider is a stand-in OpenID provider: discovery, JWKS and token endpoint. It signs ID tokens with
// key (RS256 for an RSA key, ES256 for an EC P-256 key) under kid, and publishes the keys of published.
type oidcProvider struct {
	t           *testing.T
	srv         *httptest.Server
	key         crypto.Signer
	kid         string
	mu          sync.Mutex
	grants      map[string]oidcGrant
	published   []map[string]any
	jwksGate    chan struct{} // when set, a JWKS request waits until it is closed
	jwksWaiting chan struct{} // told when a JWKS request waits at the gate
	jwksFetches atomic.Int32
}

type oidcGrant struct {
	claims    jwt.MapClaims
	challenge string
	key       crypto.Signer
	kid       string
}

const oidcClient, oidcSecret = "studio-client", "studio-secret"

// withOIDC starts a stand-in provider (RS256) and configures the service to use it.
func withOIDC(t *testing.T) (*oidcProvider, envOption) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return withOIDCKey(t, key, "k1")
}

// withOIDCKey starts a stand-in provider that signs with key under kid and configures the service to use it.
func withOIDCKey(t *testing.T, key crypto.Signer, kid string) (*oidcProvider, envOption) {
	t.Helper()
	p := &oidcProvider{t: t, key: key, kid: kid, grants: map[string]oidcGrant{}, published: []map[string]any{jwkOf(key, kid)}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize",
			"token_endpoint": p.srv.URL + "/token", "jwks_uri": p.srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		p.jwksFetches.Add(1)
		p.mu.Lock()
		gate, waiting := p.jwksGate, p.jwksWaiting
		p.mu.Unlock()
		if gate != nil {
			waiting <- struct{}{}
			<-gate
		}
		p.mu.Lock()
		keys := p.published
		p.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		p.mu.Lock()
		g, ok := p.grants[r.PostFormValue("code")]
		delete(p.grants, r.PostFormValue("code"))
		p.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if id != oidcClient || secret != oidcSecret || !ok || r.PostFormValue("grant_type") != "authorization_code" ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			w.WriteHeader(400)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": "invalid_grant"})
			return
		}
		var method jwt.SigningMethod = jwt.SigningMethodRS256
		if _, ec := g.key.(*ecdsa.PrivateKey); ec {
			method = jwt.SigningMethodES256
		}
		tok := jwt.NewWithClaims(method, g.claims)
		tok.Header["kid"] = g.kid
		signed, _ := tok.SignedString(g.key)
		w.Header().Set("Content-Type", "application/json") // RFC 6749 section 5.1
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "id_token": signed})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p, func(c *envConfig) {
		c.vars["SERVICE_OIDC_ISSUER"] = p.srv.URL
		c.vars["SERVICE_OIDC_CLIENT_ID"] = oidcClient
		c.vars["SERVICE_OIDC_CLIENT_SECRET"] = oidcSecret
	}
}

// jwkOf is the public JWK of an RSA or EC P-256 key.
func jwkOf(key crypto.Signer, kid string) map[string]any {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
			"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PrivateKey:
		point, _ := k.PublicKey.Bytes() // 0x04 || X || Y, 32 bytes each for P-256
		return map[string]any{"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
			"x": base64.RawURLEncoding.EncodeToString(point[1:33]), "y": base64.RawURLEncoding.EncodeToString(point[33:])}
	}
	panic(fmt.Sprintf("no JWK for %T", key))
}

// rotate makes the provider sign with key under kid; it publishes that key only, or beside the others (keep).
func (p *oidcProvider) rotate(key crypto.Signer, kid string, keep bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.key, p.kid = key, kid
	if !keep {
		p.published = nil
	}
	p.published = append(p.published[:len(p.published):len(p.published)], jwkOf(key, kid))
}

// holdKeys makes JWKS requests wait until release is called; waiting is told when one arrives.
func (p *oidcProvider) holdKeys() (waiting <-chan struct{}, release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gate, w := make(chan struct{}), make(chan struct{}, 16)
	p.jwksGate, p.jwksWaiting = gate, w
	var once sync.Once
	return w, func() {
		once.Do(func() {
			p.mu.Lock()
			p.jwksGate = nil
			p.mu.Unlock()
			close(gate)
		})
	}
}

// signIn runs GET /api/auth/oidc/start in the browser, lets the provider issue a code for claims (edited
// by edit, given the nonce), and follows the callback; it returns the callback's answer.
func (e *env) signIn(b *http.Client, p *oidcProvider, ret string, claims jwt.MapClaims, edit func(c jwt.MapClaims, g *oidcGrant, q url.Values)) *resp {
	e.t.Helper()
	return e.browse(b, "GET", e.oidcAuthorize(b, p, ret, claims, edit))
}

// oidcAuthorize runs GET /api/auth/oidc/start in the browser and lets the provider issue a code for
// claims (edited by edit, given the nonce); it returns the callback path the provider sends the browser to.
func (e *env) oidcAuthorize(b *http.Client, p *oidcProvider, ret string, claims jwt.MapClaims, edit func(c jwt.MapClaims, g *oidcGrant, q url.Values)) string {
	e.t.Helper()
	path := "/api/auth/oidc/start"
	if ret != "" {
		path += "?return=" + url.QueryEscape(ret)
	}
	start := e.browse(b, "GET", path)
	if start.Status != http.StatusFound {
		e.t.Fatalf("oidc start = %d %s", start.Status, start.Body)
	}
	loc, _ := url.Parse(start.Header.Get("Location"))
	q := loc.Query()
	if !strings.HasPrefix(loc.String(), p.srv.URL+"/authorize?") || q.Get("client_id") != oidcClient || q.Get("code_challenge_method") != "S256" ||
		q.Get("redirect_uri") != e.app.Config.BaseURL+"/api/auth/oidc/callback" || q.Get("state") == "" || q.Get("nonce") == "" {
		e.t.Fatalf("authorization URL = %s", loc)
	}
	c := jwt.MapClaims{"iss": p.srv.URL, "aud": oidcClient, "exp": time.Now().Add(5 * time.Minute).Unix(), "iat": time.Now().Unix(), "nonce": q.Get("nonce")}
	for k, v := range claims {
		c[k] = v
	}
	p.mu.Lock()
	g := oidcGrant{claims: c, challenge: q.Get("code_challenge"), key: p.key, kid: p.kid}
	p.mu.Unlock()
	back := url.Values{"state": {q.Get("state")}, "code": {models.NewID()}}
	if edit != nil {
		edit(c, &g, back)
	}
	p.mu.Lock()
	p.grants[back.Get("code")] = g
	p.mu.Unlock()
	return "/api/auth/oidc/callback?" + back.Encode()
}

// browse sends a request with the browser client and checks /api answers against the OpenAPI document.
func (e *env) browse(b *http.Client, method, path string) *resp {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, nil)
	res, err := b.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	out := &resp{Status: res.StatusCode, Header: res.Header}
	out.Body, _ = io.ReadAll(res.Body)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(out.Body, &out.JSON)
	}
	if strings.HasPrefix(path, "/api/") {
		e.validate(req, nil, out)
	}
	return out
}

func TestOIDCSignIn(t *testing.T) {
	p, oidc := withOIDC(t)
	sink, smtp := withSMTP(t)
	e := newEnv(t, oidc, smtp)
	claims := jwt.MapClaims{"sub": "alice-1", "email": "Alice@Example.com", "email_verified": true, "name": "Alice"}

	r := e.signIn(e.browser(), p, "", claims, nil).expect(t, 200)
	user := r.JSON["user"].(map[string]any)
	if user["email"] != "alice@example.com" || user["nickname"] != "Alice" || r.str("token") == "" {
		t.Fatalf("first sign-in = %s", r.Body)
	}
	if w := e.call("GET", "/api/whoami", r.str("token"), nil).expect(t, 200); w.str("id") != user["id"] {
		t.Fatalf("whoami = %s", w.Body)
	}
	again := e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "alice-1", "email": "changed@example.com", "email_verified": true}, nil).expect(t, 200)
	if again.JSON["user"].(map[string]any)["id"] != user["id"] {
		t.Fatal("the same subject made a second account")
	}

	// An account registered by e-mail is linked by a verified e-mail, not by an unverified one.
	e.register(sink, "bob@example.com", "bob password")
	e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "bob-1", "email": "bob@example.com", "email_verified": false}, nil).expect(t, 403)
	linked := e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "bob-1", "email": "bob@example.com", "email_verified": true}, nil).expect(t, 200)
	if linked.JSON["user"].(map[string]any)["email"] != "bob@example.com" {
		t.Fatalf("link = %s", linked.Body)
	}
	e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "bob-2", "email": "bob@example.com", "email_verified": true}, nil).expect(t, 409)

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, c := range []struct {
		name string
		edit func(c jwt.MapClaims, g *oidcGrant, q url.Values)
	}{
		{"wrong nonce", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { c["nonce"] = "other" }},
		{"wrong audience", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { c["aud"] = "someone-else" }},
		{"wrong issuer", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { c["iss"] = "https://evil.example" }},
		{"expired", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { c["exp"] = time.Now().Add(-time.Hour).Unix() }},
		{"foreign signature", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { g.key = other }},
		{"state mismatch", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { q.Set("state", "forged") }},
		{"wrong PKCE verifier", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { g.challenge = "x" }},
		{"provider error", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { q.Del("code"); q.Set("error", "access_denied") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "mallory", "email": "m@example.com", "email_verified": true}, c.edit)
			if r.Status != 401 {
				t.Fatalf("status %d, want 401: %s", r.Status, r.Body)
			}
		})
	}
	var n int64
	e.app.DB.Gorm.Model(&models.User{}).Where("email = ?", "m@example.com").Count(&n)
	if n != 0 {
		t.Fatal("a refused sign-in created an account")
	}
	// The callback without the start's cookie is refused.
	e.browse(e.browser(), "GET", "/api/auth/oidc/callback?state=x&code=y").expect(t, 401)
	e.browse(e.browser(), "GET", "/api/auth/oidc/start?return="+url.QueryEscape("https://evil.example/")).expect(t, 400)
}

// TestOIDCSignInES256: a provider that signs its ID tokens with an EC P-256 key (ES256), and names no
// algorithm in its discovery document, signs people in through the real HTTP surface; tokens with a
// foreign key, another audience, another nonce or a past expiry are refused and create nothing.
func TestOIDCSignInES256(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, oidcOpt := withOIDCKey(t, key, "ec-1")
	e := newEnv(t, oidcOpt)
	r := e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "erin-1", "email": "Erin@Example.com", "email_verified": true, "name": "Erin"}, nil).expect(t, 200)
	user := r.JSON["user"].(map[string]any)
	if user["email"] != "erin@example.com" || user["nickname"] != "Erin" || r.str("token") == "" {
		t.Fatalf("ES256 sign-in = %s", r.Body)
	}
	if w := e.call("GET", "/api/whoami", r.str("token"), nil).expect(t, 200); w.str("id") != user["id"] {
		t.Fatalf("whoami = %s", w.Body)
	}
	// With a return path: a session cookie and the redirect, as for RS256.
	back := e.signIn(e.browser(), p, "/device", jwt.MapClaims{"sub": "erin-1", "email": "erin@example.com", "email_verified": true}, nil)
	if back.Status != http.StatusSeeOther || back.Header.Get("Location") != "/device" || !strings.Contains(strings.Join(back.Header.Values("Set-Cookie"), "\n"), models.SessionCookie+"=") {
		t.Fatalf("ES256 sign-in with return = %d %v", back.Status, back.Header)
	}

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, c := range []struct {
		name string
		edit func(c jwt.MapClaims, g *oidcGrant, q url.Values)
	}{
		{"wrong key", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { g.key = other }},
		{"wrong key id", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { g.key, g.kid = other, "ec-unknown" }},
		{"wrong audience", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { c["aud"] = "someone-else" }},
		{"wrong nonce", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { c["nonce"] = "other" }},
		{"expired", func(c jwt.MapClaims, g *oidcGrant, q url.Values) { c["exp"] = time.Now().Add(-time.Hour).Unix() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "mallory", "email": "m@example.com", "email_verified": true}, c.edit)
			if r.Status != 401 {
				t.Fatalf("status %d, want 401: %s", r.Status, r.Body)
			}
		})
	}
	var n int64
	e.app.DB.Gorm.Model(&models.User{}).Where("email = ?", "m@example.com").Count(&n)
	if n != 0 {
		t.Fatal("a refused sign-in created an account")
	}
	// The key set was read once: tokens with a foreign key did not make it be fetched again within
	// oidc.KeyRefetchInterval.
	if got := p.jwksFetches.Load(); got != 1 {
		t.Fatalf("key set fetched %d times, want 1", got)
	}
}

// TestOIDCKeyRotation: the provider changes its key; the new key is fetched and sign-in works. A token
// with a key that is not cached makes the key set be fetched again at most every oidc.KeyRefetchInterval.
func TestOIDCKeyRotation(t *testing.T) {
	p, oidcOpt := withOIDC(t)
	e := newEnv(t, oidcOpt)
	alice := jwt.MapClaims{"sub": "alice-1", "email": "alice@example.com", "email_verified": true}
	first := e.signIn(e.browser(), p, "", alice, nil).expect(t, 200)

	next, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p.rotate(next, "k2", false)
	// Within the interval after the last fetch, the unknown key is not fetched: refused.
	e.signIn(e.browser(), p, "", alice, nil).expect(t, 401)
	if got := p.jwksFetches.Load(); got != 1 {
		t.Fatalf("key set fetched %d times within the refetch interval, want 1", got)
	}

	later := time.Now().UTC().Add(oidc.KeyRefetchInterval + time.Second)
	e.app.Now = func() time.Time { return later }
	r := e.signIn(e.browser(), p, "", alice, nil).expect(t, 200)
	if r.JSON["user"].(map[string]any)["id"] != first.JSON["user"].(map[string]any)["id"] {
		t.Fatal("the same subject made a second account after the key rotation")
	}
	if got := p.jwksFetches.Load(); got != 2 {
		t.Fatalf("key set fetched %d times, want 2", got)
	}
	// The old key is gone from the provider's set: a token signed with it is refused.
	old, _ := rsa.GenerateKey(rand.Reader, 2048)
	e.signIn(e.browser(), p, "", alice, func(c jwt.MapClaims, g *oidcGrant, q url.Values) { g.key, g.kid = old, "k1" }).expect(t, 401)
}

// TestOIDCSlowKeySetDoesNotBlockCachedKey: while the key set is being fetched again (for a token whose
// key is new) and the provider is slow to answer, a sign-in whose key is cached goes through at once.
func TestOIDCSlowKeySetDoesNotBlockCachedKey(t *testing.T) {
	p, oidcOpt := withOIDC(t)
	e := newEnv(t, oidcOpt)
	e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "alice-1", "email": "alice@example.com", "email_verified": true}, nil).expect(t, 200)

	// The provider publishes a second key beside the first, and the refetch interval has passed.
	k1, kid1 := p.key, p.kid
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p.rotate(k2, "k2", true)
	later := time.Now().UTC().Add(oidc.KeyRefetchInterval + time.Second)
	e.app.Now = func() time.Time { return later }

	waiting, release := p.holdKeys()
	var released atomic.Bool
	safety := time.AfterFunc(5*time.Second, func() { released.Store(true); release() })
	defer safety.Stop()
	defer release()

	// Bob's token is signed with the new key: his callback waits for the key set.
	b := e.browser()
	callback := e.oidcAuthorize(b, p, "", jwt.MapClaims{"sub": "bob-1", "email": "bob@example.com", "email_verified": true}, nil)
	bob := make(chan int, 1)
	go func() {
		res, err := b.Get(e.srv.URL + callback)
		if err != nil {
			bob <- 0
			return
		}
		res.Body.Close()
		bob <- res.StatusCode
	}()
	select {
	case <-waiting:
	case <-time.After(15 * time.Second):
		t.Fatal("the new key did not make the key set be fetched")
	}

	// Carol's token is signed with the cached key: she is signed in while the fetch hangs.
	start := time.Now()
	carol := e.signIn(e.browser(), p, "", jwt.MapClaims{"sub": "carol-1", "email": "carol@example.com", "email_verified": true},
		func(c jwt.MapClaims, g *oidcGrant, q url.Values) { g.key, g.kid = k1, kid1 })
	if released.Load() {
		t.Fatalf("the sign-in with a cached key waited %s for the key set fetch", time.Since(start))
	}
	carol.expect(t, 200)

	release()
	select {
	case status := <-bob:
		if status != 200 {
			t.Fatalf("sign-in with the new key = %d, want 200", status)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the sign-in with the new key did not finish")
	}
	if got := p.jwksFetches.Load(); got != 2 {
		t.Fatalf("key set fetched %d times, want 2", got)
	}
}

// TestDeviceApprovalAfterThirdPartySignIn: a person without a password signs in with the provider from the
// device page, comes back with a session, and approves without typing a password.
func TestDeviceApprovalAfterThirdPartySignIn(t *testing.T) {
	p, oidc := withOIDC(t)
	e := newEnv(t, oidc)
	start := e.call("POST", "/api/auth/device", "", nil).expect(t, 200)
	code := start.str("user_code")
	b := e.browser()
	page, _ := e.devicePage(b, code)
	link := "/api/auth/oidc/start?return=" + url.QueryEscape("/device?user_code="+code)
	if !strings.Contains(page, strings.ReplaceAll(link, "&", "&amp;")) && !strings.Contains(page, link) {
		t.Fatalf("page has no third-party sign-in link %s:\n%s", link, page)
	}
	r := e.signIn(b, p, "/device?user_code="+code, jwt.MapClaims{"sub": "carol", "email": "carol@example.com", "email_verified": true}, nil)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/device?user_code="+code {
		t.Fatalf("callback with return = %d %v", r.Status, r.Header)
	}
	page, csrf := e.devicePage(b, code)
	if !strings.Contains(page, "carol@example.com") || strings.Contains(page, `name="password"`) {
		t.Fatalf("signed-in page:\n%s", page)
	}
	if status, body := e.submitDevice(b, url.Values{"csrf": {csrf}, "user_code": {code}, "action": {"approve"}}); status != 200 {
		t.Fatalf("approve = %d\n%s", status, body)
	}
	tok := e.call("POST", "/api/auth/device/token", "", map[string]any{"device_code": start.str("device_code")}).expect(t, 200)
	if w := e.call("GET", "/api/whoami", tok.str("access_token"), nil).expect(t, 200); w.str("email") != "carol@example.com" {
		t.Fatalf("whoami = %s", w.Body)
	}
}

// TestOneInvitationRegistersOneAccount races registrations that share one invitation: exactly one wins.
func TestOneInvitationRegistersOneAccount(t *testing.T) {
	sink, smtp := withSMTP(t)
	e := newEnv(t, smtp)
	inv := e.invitation()
	emails := []string{"r1@example.com", "r2@example.com", "r3@example.com", "r4@example.com"}
	codes := map[string]string{}
	for _, m := range emails {
		e.call("POST", "/api/auth/register/code", "", map[string]any{"email": m}).expect(t, 200)
		codes[m] = sink.lastCode(t, m)
	}
	statuses := make(chan int, len(emails))
	var wg sync.WaitGroup
	for _, m := range emails {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.call("POST", "/api/auth/register", "", map[string]any{"email": m, "password": "race password", "code": codes[m], "invitation_code": inv})
			statuses <- r.Status
		}()
	}
	wg.Wait()
	close(statuses)
	var ok, refused int
	for s := range statuses {
		switch s {
		case 200:
			ok++
		case 400:
			refused++
		}
	}
	var users int64
	e.app.DB.Gorm.Model(&models.User{}).Count(&users)
	if ok != 1 || refused != len(emails)-1 || users != 1 {
		t.Fatalf("%d registered, %d refused, %d accounts; want 1, %d, 1", ok, refused, users, len(emails)-1)
	}
}
