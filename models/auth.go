package models

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
)

// The auth*.go files hold the rules of personal accounts: registration by e-mail code and invitation
// (auth_register.go), password login and password change (auth_password.go), sign-in codes that set a
// new password (auth_signin_code.go), browser sessions (auth_session.go), RFC 8628 device authorization
// (auth_device.go) and third-party sign-in through OpenID Connect (auth_oidc.go). This file holds what
// they share: the limits, the answers of a login, and the e-mail, password and rate-limit checks.

// Limits of personal sign-in.
const (
	// EmailCodeTTL is how long a registration code stays valid.
	EmailCodeTTL = 10 * time.Minute
	// MinPasswordLength is the shortest accepted password, in characters.
	MinPasswordLength = 8
	// MaxPasswordBytes is the longest accepted password, in bytes: bcrypt's input limit.
	MaxPasswordBytes = 72

	registerCodePerEmail   = 5   // registration codes sent per e-mail address and hour
	registerCodePerAddress = 20  // registration codes requested per client address and hour
	attemptsPerEmail       = 20  // register or login attempts per e-mail address and hour
	attemptsPerAddress     = 200 // register or login attempts per client address and hour
)

// maxEmailLen bounds an e-mail address (RFC 5321's path limit is 256 octets with its brackets).
const maxEmailLen = 254

// UserView is the public shape of a personal account in login answers.
type UserView struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Nickname string `json:"nickname"`
}

// LoginResult is the answer of a successful login or registration: a personal-login JWT and its user.
type LoginResult struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	User      UserView  `json:"user"`
}

// WhoamiView is the answer of GET /api/whoami.
type WhoamiView struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Nickname string `json:"nickname"`
	Credits  int64  `json:"credits"`
	// CallbackSecret verifies the signatures of this person's job callbacks (Standard Webhooks).
	CallbackSecret string `json:"callback_secret"`
}

// checkEmail normalises an e-mail address and checks that it is a bare address.
func checkEmail(raw string) (string, error) {
	email := NormalizeEmail(raw)
	if email == "" {
		return "", Invalid("email is required")
	}
	if len(email) > maxEmailLen {
		return "", Invalid("email is too long: an e-mail address has at most %d characters", maxEmailLen)
	}
	if !validEmail(email) {
		return "", Invalid("email %q is not a valid e-mail address", raw)
	}
	return email, nil
}

// validPassword checks the password rules: at least MinPasswordLength characters, at most 72 bytes.
func validPassword(field, pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLength {
		return Invalid("%s must be at least %d characters", field, MinPasswordLength)
	}
	if len(pw) > MaxPasswordBytes {
		return Invalid("%s must be at most %d bytes", field, MaxPasswordBytes)
	}
	return nil
}

// limitSubject counts one call of kind for a caller that is not signed in yet (an e-mail address or a
// client address), with the same hourly counters as every other rate limit.
func (a *App) limitSubject(tx *gorm.DB, kind, subject string, limit int) error {
	if subject == "" {
		return nil
	}
	return a.rateLimitTx(tx, &Identity{Kind: IdentityUser, UserID: subject}, kind, 1, limit)
}

// countAttempt counts one register or login attempt per e-mail and per client address, in a transaction
// of its own so that failed attempts count.
func (a *App) countAttempt(ctx context.Context, kind, email, clientAddr string) error {
	return a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.limitSubject(tx, kind+"/email", "email:"+email, attemptsPerEmail); err != nil {
			return err
		}
		return a.limitSubject(tx, kind+"/address", "addr:"+clientAddr, attemptsPerAddress)
	})
}

// clearSubjectTx forgets the calls of kind counted for subject in the current hour (limitSubject).
func (a *App) clearSubjectTx(tx *gorm.DB, kind, subject string) error {
	key, window := a.rateWindow(&Identity{Kind: IdentityUser, UserID: subject}, kind)
	if err := tx.Where("key = ? AND window_start = ?", key, window).Delete(&RateCounter{}).Error; err != nil {
		return Internal("rate limit: clear", err)
	}
	return nil
}

// consumeEmailCodeTx marks a valid code of email used, the code named by its hash (emailCodeHash or
// signInCodeHash); a wrong, expired or used code is KindInvalid.
func (a *App) consumeEmailCodeTx(tx *gorm.DB, email, codeHash string) error {
	var row EmailCode
	err := tx.Where("email = ? AND code_hash = ?", email, codeHash).Order("created_at DESC").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Invalid("wrong verification code: use the latest code e-mailed to %s", email)
	}
	if err != nil {
		return Internal("register: look up code", err)
	}
	now := a.Now()
	switch {
	case row.UsedAt != nil:
		return Invalid("this verification code was already used: ask for a new one")
	case !now.Before(row.ExpiresAt):
		return Invalid("this verification code has expired: ask for a new one")
	}
	return useEmailCodeTx(tx, row.ID, now)
}

// useEmailCodeTx marks an e-mailed code used, once: a code used concurrently is KindInvalid.
func useEmailCodeTx(tx *gorm.DB, id string, now time.Time) error {
	res := tx.Model(&EmailCode{}).Where("id = ? AND used_at IS NULL", id).Update("used_at", now)
	if res.Error != nil {
		return Internal("e-mail code: use", res.Error)
	}
	if res.RowsAffected != 1 {
		return Invalid("this code was already used: ask for a new one")
	}
	return nil
}

// loginResult signs a 7-day login token for u.
func (a *App) loginResult(u *User) (*LoginResult, error) {
	tok, exp, err := a.issueUserToken(u, LoginTTL)
	if err != nil {
		return nil, Internal("login: issue token", err)
	}
	return &LoginResult{Token: tok, ExpiresAt: exp.UTC(), User: UserView{ID: u.ID, Email: u.Email, Nickname: u.Nickname}}, nil
}

// Whoami returns the personal account behind a login.
func (au *AuthService) Whoami(ctx context.Context, id *Identity) (*WhoamiView, error) {
	a := au.a
	if err := id.Require(CapOwnAccount); err != nil {
		return nil, err
	}
	var u User
	if err := a.DB.WithContext(ctx).First(&u, "id = ?", id.UserID).Error; err != nil {
		return nil, Internal("whoami: look up user", err)
	}
	return &WhoamiView{ID: u.ID, Email: u.Email, Nickname: u.Nickname, Credits: u.Credits,
		CallbackSecret: a.Jobs().UserCallbackSecret(u.ID)}, nil
}

// AddressKey is the subject of per-address limits for a connection's peer address (http.Request's
// RemoteAddr): its host, an IPv6 address counted by its /64 prefix, the block one client usually holds.
// X-Forwarded-For is not trusted, since any client can send it; behind a reverse proxy every caller
// shares the proxy's address. At most 64 bytes are kept.
func AddressKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if len(host) > 64 {
			host = host[:64]
		}
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// SealCookie seals a value a surface keeps in a browser cookie (the console's flash message) with the
// service secret; OpenCookie opens it (an error for a value it did not seal).
func (au *AuthService) SealCookie(v string) string { return au.a.sealer.Seal(v) }

// OpenCookie opens a value sealed by SealCookie.
func (au *AuthService) OpenCookie(v string) (string, error) { return au.a.sealer.Open(v) }

// SignForm returns the token of a form bound to value (the browser's pre-session cookie) for purpose,
// signed with the service secret; a surface compares it with models.EqualHash.
func (au *AuthService) SignForm(purpose, value string) string {
	return base64.RawURLEncoding.EncodeToString(Sign(au.a.secret, purpose, []byte(value)))
}

// AuthService holds identities and the ways to obtain one: keys, passwords, e-mailed codes, sessions,
// device logins and OpenID Connect.
type AuthService struct{ a *App }

// Auth returns identities and sign-in.
func (a *App) Auth() *AuthService { return a.svc.auth }
