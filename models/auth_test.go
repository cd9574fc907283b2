package models_test

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"studio/models"
	"studio/models/modelstest"
)

func TestNormalizeUserCode(t *testing.T) {
	for in, want := range map[string]string{
		"BCDF-GHJK": "BCDF-GHJK", "bcdfghjk": "BCDF-GHJK", " bcdf ghjk ": "BCDF-GHJK", "bcd": "BCD", "": "",
	} {
		if got := models.NormalizeUserCode(in); got != want {
			t.Errorf("NormalizeUserCode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSafeReturnPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/device?user_code=BCDF-GHJK": true, "/": true,
		"": false, "//evil.example/": false, "/\\evil.example": false, "https://evil.example/": false, "device": false, "/a\r\nb": false,
	} {
		if got := models.SafeReturnPath(p); got != want {
			t.Errorf("SafeReturnPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestDeviceAuthorizationStates walks one device code through every answer of the token endpoint.
func TestDeviceAuthorizationStates(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	now := time.Now().UTC()
	app.Now = func() time.Time { return now }
	u := models.User{ID: models.NewID(), Email: "d@example.com"}
	if err := app.DB.Gorm.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	answer := func(code string) string {
		t.Helper()
		tok, err := app.Auth().PollDeviceToken(ctx, code)
		if err != nil {
			if models.KindOf(err) != models.KindInvalid {
				t.Fatalf("poll: %v is not KindInvalid", err)
			}
			return err.Error()
		}
		if tok.TokenType != "Bearer" || tok.AccessToken == "" || tok.ExpiresIn != int(models.LoginTTL.Seconds()) {
			t.Fatalf("token = %+v", tok)
		}
		return "token"
	}
	start, err := app.Auth().StartDeviceAuthorization(ctx, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range strings.ReplaceAll(start.UserCode, "-", "") {
		if !strings.ContainsRune("BCDFGHJKLMNPQRSTVWXZ", r) {
			t.Fatalf("user code %q has the ambiguous letter %q", start.UserCode, r)
		}
	}
	steps := []struct {
		advance time.Duration
		do      func()
		want    string
	}{
		{0, nil, models.DeviceAuthorizationPending},
		{time.Second, nil, models.DeviceSlowDown},     // interval 5 -> 10
		{6 * time.Second, nil, models.DeviceSlowDown}, // 6 s < 10: interval 15
		{15 * time.Second, nil, models.DeviceAuthorizationPending},
		{0, func() {
			if err := app.Auth().DecideDevice(ctx, strings.ToLower(start.UserCode), u.ID, true); err != nil {
				t.Fatal(err)
			}
		}, models.DeviceSlowDown}, // approval does not excuse polling too fast: interval 20
		{20 * time.Second, nil, "token"},
		{20 * time.Second, nil, models.DeviceInvalidGrant},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if s.do != nil {
			s.do()
		}
		if got := answer(start.DeviceCode); got != s.want {
			t.Fatalf("step %d: answer %q, want %q", i, got, s.want)
		}
	}
	if err := app.Auth().DecideDevice(ctx, start.UserCode, u.ID, true); models.KindOf(err) != models.KindConflict {
		t.Fatalf("deciding a used code: %v, want a conflict", err)
	}
	if err := app.Auth().DecideDevice(ctx, "ZZZZ-ZZZZ", u.ID, true); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("deciding an unknown code: %v, want not found", err)
	}
	other, _ := app.Auth().StartDeviceAuthorization(ctx, "192.0.2.1")
	if err := app.Auth().DecideDevice(ctx, other.UserCode, "", true); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("approving without an account: %v", err)
	}
	now = now.Add(models.DeviceCodeTTL)
	if got := answer(other.DeviceCode); got != models.DeviceExpiredToken {
		t.Fatalf("expired: %q", got)
	}
	if err := app.Auth().DecideDevice(ctx, other.UserCode, u.ID, true); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("approving an expired code: %v", err)
	}
}

func TestPasswordOfAThirdPartyAccount(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	sub := "issuer|x"
	u := models.User{ID: models.NewID(), Email: "oidc@example.com", OIDCSubject: &sub}
	if err := app.DB.Gorm.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := app.Auth().Authenticate(ctx, u.Email, "", "192.0.2.1"); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("empty password: %v", err)
	}
	if _, err := app.Auth().Authenticate(ctx, u.Email, "anything goes", "192.0.2.1"); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("an account without a password signed in: %v", err)
	}
	if err := app.Auth().ChangePassword(ctx, modelstest.User(u.ID), "guess", "first password"); models.KindOf(err) != models.KindForbidden {
		t.Fatalf("old password given for an account without one: %v", err)
	}
	if err := app.Auth().ChangePassword(ctx, modelstest.User(u.ID), "", "first password"); err != nil {
		t.Fatalf("setting the first password: %v", err)
	}
	if err := app.Auth().ChangePassword(ctx, modelstest.User(u.ID), "", "second password"); models.KindOf(err) != models.KindForbidden {
		t.Fatalf("replacing a password without the old one: %v", err)
	}
	if got, err := app.Auth().Authenticate(ctx, "OIDC@example.com", "first password", "192.0.2.1"); err != nil || got.ID != u.ID {
		t.Fatalf("sign-in with the new password: %v", err)
	}
}

func TestSignInCodeSetsANewPassword(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	// SERVICE_SMTP_URL is unset: the e-mail is written to the log, where the code is read from.
	logs := &lockedBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	codeRE := regexp.MustCompile(`sign-in code is (\d{6})`)
	lastCode := func() string {
		m := codeRE.FindAllStringSubmatch(logs.String(), -1)
		if m == nil {
			t.Fatalf("no code in the log: %s", logs.String())
		}
		return m[len(m)-1][1]
	}
	u := models.User{ID: models.NewID(), Email: "buyer@example.com", Nickname: "buyer"}
	if err := app.DB.Gorm.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	if err := app.Auth().SendSignInCode(ctx, "nobody@example.com", "192.0.2.1"); err != nil || codeRE.MatchString(logs.String()) {
		t.Fatalf("an unknown address: %v, log %s", err, logs.String())
	}
	if err := app.Auth().SendSignInCode(ctx, "not an address", "192.0.2.1"); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("an invalid address: %v", err)
	}
	if err := app.Auth().SendSignInCode(ctx, "Buyer@Example.com", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	code := lastCode()
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	if _, err := app.Auth().ResetPassword(ctx, "buyer@example.com", wrong, "a new password", "192.0.2.1"); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("a wrong code: %v", err)
	}
	if _, err := app.Auth().ResetPassword(ctx, "buyer@example.com", code, "short", "192.0.2.1"); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("a short password: %v", err)
	}
	// A registration cannot use a sign-in code.
	if _, err := app.Auth().Register(ctx, models.RegisterInput{Email: "buyer@example.com", Password: "a new password", Code: code, InvitationCode: "x"}, "192.0.2.1"); err == nil {
		t.Fatal("registered with a sign-in code")
	}
	got, err := app.Auth().ResetPassword(ctx, "buyer@example.com", code, "a new password", "192.0.2.1")
	if err != nil || got.ID != u.ID {
		t.Fatalf("reset: %v", err)
	}
	if _, err := app.Auth().Authenticate(ctx, "buyer@example.com", "a new password", "192.0.2.1"); err != nil {
		t.Fatalf("sign-in with the new password: %v", err)
	}
	if _, err := app.Auth().ResetPassword(ctx, "buyer@example.com", code, "a third password", "192.0.2.1"); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("a used code: %v", err)
	}
}

// lockedBuffer is a bytes.Buffer safe for the log's concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
