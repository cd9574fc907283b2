package models_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"studio/models"
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
	if err := app.DB.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	answer := func(code string) string {
		t.Helper()
		tok, err := app.PollDeviceToken(ctx, code)
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
	start, err := app.StartDeviceAuthorization(ctx, "192.0.2.1")
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
			if err := app.DecideDevice(ctx, strings.ToLower(start.UserCode), u.ID, true); err != nil {
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
	if err := app.DecideDevice(ctx, start.UserCode, u.ID, true); models.KindOf(err) != models.KindConflict {
		t.Fatalf("deciding a used code: %v, want a conflict", err)
	}
	if err := app.DecideDevice(ctx, "ZZZZ-ZZZZ", u.ID, true); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("deciding an unknown code: %v, want not found", err)
	}
	other, _ := app.StartDeviceAuthorization(ctx, "192.0.2.1")
	if err := app.DecideDevice(ctx, other.UserCode, "", true); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("approving without an account: %v", err)
	}
	now = now.Add(models.DeviceCodeTTL)
	if got := answer(other.DeviceCode); got != models.DeviceExpiredToken {
		t.Fatalf("expired: %q", got)
	}
	if err := app.DecideDevice(ctx, other.UserCode, u.ID, true); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("approving an expired code: %v", err)
	}
}

func TestPasswordOfAThirdPartyAccount(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	sub := "issuer|x"
	u := models.User{ID: models.NewID(), Email: "oidc@example.com", OIDCSubject: &sub}
	if err := app.DB.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := app.Authenticate(ctx, u.Email, "", "192.0.2.1"); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("empty password: %v", err)
	}
	if _, err := app.Authenticate(ctx, u.Email, "anything goes", "192.0.2.1"); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("an account without a password signed in: %v", err)
	}
	if err := app.ChangePassword(ctx, u.ID, "guess", "first password"); models.KindOf(err) != models.KindForbidden {
		t.Fatalf("old password given for an account without one: %v", err)
	}
	if err := app.ChangePassword(ctx, u.ID, "", "first password"); err != nil {
		t.Fatalf("setting the first password: %v", err)
	}
	if err := app.ChangePassword(ctx, u.ID, "", "second password"); models.KindOf(err) != models.KindForbidden {
		t.Fatalf("replacing a password without the old one: %v", err)
	}
	if got, err := app.Authenticate(ctx, "OIDC@example.com", "first password", "192.0.2.1"); err != nil || got.ID != u.ID {
		t.Fatalf("sign-in with the new password: %v", err)
	}
}
