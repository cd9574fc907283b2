package models

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// This file holds the rules of personal accounts: registration by e-mail code and invitation, password
// login, third-party sign-in through OpenID Connect, browser sessions, and RFC 8628 device authorization.

// Limits of personal sign-in.
const (
	// EmailCodeTTL is how long a registration code stays valid.
	EmailCodeTTL = 10 * time.Minute
	// MinPasswordLength is the shortest accepted password, in characters.
	MinPasswordLength = 8
	// MaxPasswordBytes is the longest accepted password, in bytes: bcrypt's input limit.
	MaxPasswordBytes = 72
	// DeviceCodeTTL is how long a device authorization waits for approval.
	DeviceCodeTTL = 10 * time.Minute
	// DeviceInterval is the polling interval, in seconds, given to a device at the start.
	DeviceInterval = 5
	// deviceSlowDown is the interval increase of each slow_down answer (RFC 8628 section 3.5).
	deviceSlowDown = 5
	// SessionTTL is the validity of a browser session.
	SessionTTL = 12 * time.Hour
	// SessionCookie names the cookie of a browser session.
	SessionCookie = "studio_session"

	registerCodePerEmail   = 5   // registration codes sent per e-mail address and hour
	registerCodePerAddress = 20  // registration codes requested per client address and hour
	attemptsPerEmail       = 20  // register or login attempts per e-mail address and hour
	attemptsPerAddress     = 200 // register or login attempts per client address and hour
	devicesPerAddress      = 60  // device authorizations started per client address and hour
)

// The RFC 8628 and RFC 6749 error codes of the device token endpoint; each is a KindInvalid error whose
// message is the code itself, so that the body is {"error": "<code>"}.
const (
	DeviceAuthorizationPending = "authorization_pending"
	DeviceSlowDown             = "slow_down"
	DeviceExpiredToken         = "expired_token"
	DeviceAccessDenied         = "access_denied"
	DeviceInvalidGrant         = "invalid_grant"
)

// Statuses of a DeviceAuthorization.
const (
	DevicePending  = "pending"
	DeviceApproved = "approved"
	DeviceDenied   = "denied"
	DeviceConsumed = "consumed"
)

// userCodeAlphabet has no vowels (no words) and no look-alike letters, per RFC 8628 section 6.1.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// UserView is the public shape of a personal account in login answers.
type UserView struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Nickname string `json:"nickname"`
}

// LoginResult is the answer of a successful login or registration: a personal-login JWT and its user.
type LoginResult struct {
	OK        bool      `json:"ok"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	User      UserView  `json:"user"`
}

// WhoamiView is the answer of GET /api/whoami.
type WhoamiView struct {
	OK       bool   `json:"ok"`
	ID       string `json:"id"`
	Email    string `json:"email"`
	Nickname string `json:"nickname"`
	Credits  int64  `json:"credits"`
	// CallbackSecret verifies the signatures of this person's job callbacks (Standard Webhooks).
	CallbackSecret string `json:"callback_secret"`
}

// RegisterInput is the body of POST /api/auth/register.
type RegisterInput struct {
	Email          string `json:"email"`
	Password       string `json:"password"`
	Code           string `json:"code"`
	InvitationCode string `json:"invitation_code"`
	Nickname       string `json:"nickname"`
}

// ---- registration ----

// checkEmail normalises an e-mail address and checks that it is a bare address.
func checkEmail(raw string) (string, error) {
	email := NormalizeEmail(raw)
	if email == "" {
		return "", Invalid("email is required")
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

// emailCodeHash binds a registration code to its address under the service secret.
func (a *App) emailCodeHash(email, code string) string {
	return hex.EncodeToString(Sign(a.Secret, "email-code", []byte(email+"\n"+code)))
}

// signInCodeHash binds a sign-in code to its address; its own purpose keeps it from registering.
func (a *App) signInCodeHash(email, code string) string {
	return hex.EncodeToString(Sign(a.Secret, "signin-code", []byte(email+"\n"+code)))
}

// SendRegistrationCode e-mails a six-digit code for registering email. It is limited per e-mail address
// and per client address; an address that already has an account is KindConflict.
func (a *App) SendRegistrationCode(ctx context.Context, rawEmail, clientAddr string) error {
	email, err := checkEmail(rawEmail)
	if err != nil {
		return err
	}
	code := RandomString(6, "0123456789")
	now := a.Now()
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.limitSubject(tx, "register-code/email", "email:"+email, registerCodePerEmail); err != nil {
			return err
		}
		if err := a.limitSubject(tx, "register-code/address", "addr:"+clientAddr, registerCodePerAddress); err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&User{}).Where("email = ?", email).Count(&n).Error; err != nil {
			return Internal("register: look up e-mail", err)
		}
		if n > 0 {
			return Conflict("an account with this e-mail already exists: sign in instead")
		}
		if err := tx.Where("expires_at < ?", now.Add(-24*time.Hour)).Delete(&EmailCode{}).Error; err != nil {
			return Internal("register: prune codes", err)
		}
		row := EmailCode{ID: NewID(), Email: email, CodeHash: a.emailCodeHash(email, code), ClientIP: clientAddr,
			ExpiresAt: now.Add(EmailCodeTTL), CreatedAt: now}
		if err := tx.Create(&row).Error; err != nil {
			return Internal("register: store code", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	body := fmt.Sprintf("Your studio registration code is %s\n\nIt is valid for %d minutes and can be used once.\nIf you did not ask for it, ignore this e-mail.\n",
		code, int(EmailCodeTTL.Minutes()))
	return a.SendMail(ctx, email, "Your studio registration code: "+code, body)
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
	res := tx.Model(&EmailCode{}).Where("id = ? AND used_at IS NULL", row.ID).Update("used_at", now)
	if res.Error != nil {
		return Internal("register: use code", res.Error)
	}
	if res.RowsAffected != 1 {
		return Invalid("this verification code was already used: ask for a new one")
	}
	return nil
}

// consumeInvitationTx marks an unused invitation code used by userID; an unknown or used code is KindInvalid.
func (a *App) consumeInvitationTx(tx *gorm.DB, code, userID string) error {
	res := tx.Model(&Invitation{}).Where("code = ? AND used_by IS NULL", code).
		Updates(map[string]any{"used_by": userID, "used_at": a.Now()})
	if res.Error != nil {
		return Internal("register: use invitation", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	var n int64
	if err := tx.Model(&Invitation{}).Where("code = ?", code).Count(&n).Error; err != nil {
		return Internal("register: look up invitation", err)
	}
	if n > 0 {
		return Invalid("this invitation code was already used")
	}
	return Invalid("unknown invitation code")
}

// Register creates a personal account from an e-mail code, a platform invitation and a password, and
// signs it in. The code and the invitation are consumed in the transaction that creates the user.
func (a *App) Register(ctx context.Context, in RegisterInput, clientAddr string) (*LoginResult, error) {
	email, err := checkEmail(in.Email)
	if err != nil {
		return nil, err
	}
	if err := validPassword("password", in.Password); err != nil {
		return nil, err
	}
	code := strings.TrimSpace(in.Code)
	if code == "" {
		return nil, Invalid("code is required: the six-digit code e-mailed by POST /api/auth/register/code")
	}
	invitation := strings.TrimSpace(in.InvitationCode)
	if invitation == "" {
		return nil, Invalid("invitation_code is required: registration by e-mail needs a platform invitation")
	}
	nickname := strings.TrimSpace(in.Nickname)
	if nickname == "" {
		nickname = email[:strings.IndexByte(email, '@')]
	}
	if utf8.RuneCountInString(nickname) > 100 {
		return nil, Invalid("nickname must be at most 100 characters")
	}
	if err := a.countAttempt(ctx, "register", email, clientAddr); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(in.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, Internal("register: hash password", err)
	}
	now := a.Now()
	u := User{ID: NewID(), Email: email, Nickname: nickname, PasswordHash: string(hash), CreatedAt: now, UpdatedAt: now}
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&User{}).Where("email = ?", email).Count(&n).Error; err != nil {
			return Internal("register: look up e-mail", err)
		}
		if n > 0 {
			return Conflict("an account with this e-mail already exists: sign in instead")
		}
		if err := a.consumeEmailCodeTx(tx, email, a.emailCodeHash(email, code)); err != nil {
			return err
		}
		if err := a.consumeInvitationTx(tx, invitation, u.ID); err != nil {
			return err
		}
		if err := tx.Create(&u).Error; err != nil {
			if isUniqueViolation(err) {
				return Conflict("an account with this e-mail already exists: sign in instead")
			}
			return Internal("register: create user", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a.loginResult(&u)
}

// loginResult signs a 7-day login token for u.
func (a *App) loginResult(u *User) (*LoginResult, error) {
	tok, exp, err := a.IssueUserToken(u.ID, LoginTTL)
	if err != nil {
		return nil, Internal("login: issue token", err)
	}
	return &LoginResult{OK: true, Token: tok, ExpiresAt: exp.UTC(), User: UserView{ID: u.ID, Email: u.Email, Nickname: u.Nickname}}, nil
}

// ---- password login ----

// dummyHash is compared against when the e-mail is unknown, so that a login takes as long either way.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("studio: no such account"), bcrypt.DefaultCost)
	return h
})

var errWrongLogin = Unauthenticated("wrong e-mail or password")

// Authenticate checks an e-mail and password and returns the user; any mismatch is the same
// KindUnauthenticated error, after the same bcrypt work. Attempts are limited per e-mail and address.
func (a *App) Authenticate(ctx context.Context, rawEmail, password, clientAddr string) (*User, error) {
	email := NormalizeEmail(rawEmail)
	if email == "" || password == "" {
		return nil, Invalid("email and password are required")
	}
	if err := a.countAttempt(ctx, "login", email, clientAddr); err != nil {
		return nil, err
	}
	var u User
	err := a.DB.WithContext(ctx).First(&u, "email = ?", email).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, Internal("login: look up user", err)
	}
	hash := []byte(u.PasswordHash)
	if err != nil || len(hash) == 0 {
		hash = dummyHash()
	}
	match := bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
	if err != nil || u.PasswordHash == "" || !match || u.Disabled {
		return nil, errWrongLogin
	}
	return &u, nil
}

// Login checks an e-mail and password and returns a 7-day login token.
func (a *App) Login(ctx context.Context, email, password, clientAddr string) (*LoginResult, error) {
	u, err := a.Authenticate(ctx, email, password, clientAddr)
	if err != nil {
		return nil, err
	}
	return a.loginResult(u)
}

// ChangePassword replaces a personal account's password after checking the old one. An account made by
// third-party sign-in or by a claim redemption has no password yet and sets its first one with an empty
// old password.
func (a *App) ChangePassword(ctx context.Context, userID, oldPassword, newPassword string) error {
	if err := validPassword("new_password", newPassword); err != nil {
		return err
	}
	var u User
	if err := a.DB.WithContext(ctx).First(&u, "id = ?", userID).Error; err != nil {
		return Internal("password: look up user", err)
	}
	if u.PasswordHash != "" || oldPassword != "" {
		old := []byte(u.PasswordHash)
		if len(old) == 0 {
			old = dummyHash()
		}
		if bcrypt.CompareHashAndPassword(old, []byte(oldPassword)) != nil || u.PasswordHash == "" {
			return Forbidden("old_password is wrong")
		}
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(newPassword), bcrypt.DefaultCost)
	if err != nil {
		return Internal("password: hash", err)
	}
	// The old password was checked outside the transaction (bcrypt is slow); the store is conditional on
	// the hash it was checked against.
	return a.Tx(ctx, func(tx *gorm.DB) error { return storePasswordTx(tx, &u, hash, a.Now()) })
}

// SetFirstPassword gives the personal account behind a personal-login token (the token a claim
// redemption returns) its first password, so that its owner signs in later with the e-mail and the
// password: console sign-in, device approval, POST /api/auth/login. The password follows the rules of
// registration (at least MinPasswordLength characters, at most 72 bytes). A token that is not a
// personal login is KindUnauthenticated; a disabled account KindForbidden; an account that has a
// password already KindConflict (it changes it with the old one, POST /api/auth/password).
func (a *App) SetFirstPassword(ctx context.Context, loginToken, password string) (*User, error) {
	id, err := a.ResolveIdentity(ctx, loginToken)
	if err != nil {
		return nil, err
	}
	if id.Kind != IdentityUser {
		return nil, Unauthenticated("a password is set with the login token of a personal account")
	}
	if err := validPassword("password", password); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return nil, Internal("password: hash", err)
	}
	var u User
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.First(&u, "id = ?", id.UserID).Error; err != nil {
			return Internal("password: look up user", err)
		}
		if u.Disabled {
			return errUserDisabled
		}
		if u.PasswordHash != "" {
			return errPasswordSet
		}
		return storePasswordTx(tx, &u, hash, a.Now())
	})
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// SendSignInCode e-mails a six-digit code with which the personal account of the e-mail sets a new
// password (ResetPassword): the way back in for an account that has no password (a buyer who redeemed
// a claim code and did not set one) or forgot it. Requests are limited like registration codes. An
// address without an account, or with a disabled one, gets no e-mail and the same answer, so that the
// form does not tell which addresses have accounts.
func (a *App) SendSignInCode(ctx context.Context, rawEmail, clientAddr string) error {
	email, err := checkEmail(rawEmail)
	if err != nil {
		return err
	}
	code := RandomString(6, "0123456789")
	now := a.Now()
	send := false
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.limitSubject(tx, "signin-code/email", "email:"+email, registerCodePerEmail); err != nil {
			return err
		}
		if err := a.limitSubject(tx, "signin-code/address", "addr:"+clientAddr, registerCodePerAddress); err != nil {
			return err
		}
		var u User
		err := tx.Select("id, disabled").Where("email = ?", email).Take(&u).Error
		if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && u.Disabled) {
			return nil
		}
		if err != nil {
			return Internal("sign-in code: look up e-mail", err)
		}
		row := EmailCode{ID: NewID(), Email: email, CodeHash: a.signInCodeHash(email, code), ClientIP: clientAddr,
			ExpiresAt: now.Add(EmailCodeTTL), CreatedAt: now}
		if err := tx.Create(&row).Error; err != nil {
			return Internal("sign-in code: store", err)
		}
		send = true
		return nil
	})
	if err != nil || !send {
		return err
	}
	body := fmt.Sprintf("Your studio sign-in code is %s\n\n您的 studio 登录验证码是 %s\n\nEnter it on the sign-in page to set a new password. "+
		"It is valid for %d minutes and can be used once.\nIf you did not ask for it, ignore this e-mail: your password stays as it is.\n",
		code, code, int(EmailCodeTTL.Minutes()))
	return a.SendMail(ctx, email, "Your studio sign-in code: "+code, body)
}

// ResetPassword sets a new password for the personal account of the e-mail with a code SendSignInCode
// e-mailed to it; the code is consumed in the transaction that stores the password. Attempts are
// limited per e-mail and address as logins are. A wrong, expired or used code is KindInvalid, a
// disabled account KindForbidden.
func (a *App) ResetPassword(ctx context.Context, rawEmail, code, newPassword, clientAddr string) (*User, error) {
	email, err := checkEmail(rawEmail)
	if err != nil {
		return nil, err
	}
	code = strings.TrimSpace(code)
	if code == "" {
		return nil, Invalid("code is required: the six-digit code e-mailed to %s", email)
	}
	if err := validPassword("password", newPassword); err != nil {
		return nil, err
	}
	if err := a.countAttempt(ctx, "login", email, clientAddr); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(newPassword), bcrypt.DefaultCost)
	if err != nil {
		return nil, Internal("password: hash", err)
	}
	var u User
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.consumeEmailCodeTx(tx, email, a.signInCodeHash(email, code)); err != nil {
			return err
		}
		if err := tx.First(&u, "email = ?", email).Error; err != nil {
			return Internal("password: look up user", err)
		}
		if u.Disabled {
			return errUserDisabled
		}
		return storePasswordTx(tx, &u, hash, a.Now())
	})
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// errPasswordSet refuses a first password for an account that has one.
var errPasswordSet = Conflict("this account has a password already: sign in with it, or change it with the old one (POST /api/auth/password)")

// storePasswordTx replaces u's password hash by hash, provided it is still the one u was read with;
// a concurrent change is KindConflict.
func storePasswordTx(tx *gorm.DB, u *User, hash []byte, now time.Time) error {
	res := tx.Model(&User{}).Where("id = ? AND password_hash = ?", u.ID, u.PasswordHash).
		Updates(map[string]any{"password_hash": string(hash), "updated_at": now})
	if res.Error != nil {
		return Internal("password: store", res.Error)
	}
	if res.RowsAffected != 1 {
		return Conflict("the password was changed meanwhile: try again")
	}
	u.PasswordHash = string(hash)
	return nil
}

// Whoami returns the personal account behind a login.
func (a *App) Whoami(ctx context.Context, id *Identity) (*WhoamiView, error) {
	if id.Kind != IdentityUser {
		return nil, Forbidden("whoami needs a personal login")
	}
	var u User
	if err := a.DB.WithContext(ctx).First(&u, "id = ?", id.UserID).Error; err != nil {
		return nil, Internal("whoami: look up user", err)
	}
	return &WhoamiView{OK: true, ID: u.ID, Email: u.Email, Nickname: u.Nickname, Credits: u.Credits,
		CallbackSecret: a.UserCallbackSecret(u.ID)}, nil
}

// ---- browser sessions ----

// StartUserSession creates a browser session for a personal account and returns the cookie value.
func (a *App) StartUserSession(ctx context.Context, userID string) (string, error) {
	value := RandomString(43, keyAlphabet)
	now := a.Now()
	uid := userID
	s := Session{ID: HashKey(value), Kind: string(IdentityUser), UserID: &uid, CSRF: RandomString(32, keyAlphabet),
		ExpiresAt: now.Add(SessionTTL), CreatedAt: now}
	if err := a.DB.WithContext(ctx).Create(&s).Error; err != nil {
		return "", Internal("session: create", err)
	}
	return value, nil
}

// SessionUser returns the personal account of a valid browser-session cookie; anything else is KindUnauthenticated.
func (a *App) SessionUser(ctx context.Context, cookie string) (*User, error) {
	if cookie == "" {
		return nil, Unauthenticated("not signed in")
	}
	var s Session
	err := a.DB.WithContext(ctx).First(&s, "id = ?", HashKey(cookie)).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && (s.UserID == nil || !a.Now().Before(s.ExpiresAt))) {
		return nil, Unauthenticated("not signed in")
	}
	if err != nil {
		return nil, Internal("session: look up", err)
	}
	var u User
	if err := a.DB.WithContext(ctx).First(&u, "id = ?", *s.UserID).Error; err != nil || u.Disabled {
		return nil, Unauthenticated("not signed in")
	}
	return &u, nil
}

// EndSession deletes a browser session.
func (a *App) EndSession(ctx context.Context, cookie string) error {
	if err := a.DB.WithContext(ctx).Delete(&Session{}, "id = ?", HashKey(cookie)).Error; err != nil {
		return Internal("session: delete", err)
	}
	return nil
}

// ---- device authorization (RFC 8628) ----

// DeviceStart is the answer of POST /api/auth/device.
type DeviceStart struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"`
	Interval                int    `json:"interval"`
}

// DeviceToken is the successful answer of POST /api/auth/device/token.
type DeviceToken struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

// DeviceVerificationPath is where a person approves a device, under SERVICE_BASE_URL.
const DeviceVerificationPath = "/device"

// NormalizeUserCode turns what a person typed ("abcd efgh", "ABCDEFGH") into the stored form ABCD-EFGH.
func NormalizeUserCode(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		}
	}
	c := b.String()
	if len(c) != 8 {
		return c
	}
	return c[:4] + "-" + c[4:]
}

// StartDeviceAuthorization creates a device authorization waiting for a person's approval.
func (a *App) StartDeviceAuthorization(ctx context.Context, clientAddr string) (*DeviceStart, error) {
	deviceCode := RandomString(43, keyAlphabet)
	now := a.Now()
	var userCode string
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.limitSubject(tx, "device/address", "addr:"+clientAddr, devicesPerAddress); err != nil {
			return err
		}
		if err := tx.Where("expires_at < ?", now.Add(-time.Hour)).Delete(&DeviceAuthorization{}).Error; err != nil {
			return Internal("device: prune", err)
		}
		for range 5 {
			userCode = NormalizeUserCode(RandomString(8, userCodeAlphabet))
			var n int64
			if err := tx.Model(&DeviceAuthorization{}).Where("user_code = ?", userCode).Count(&n).Error; err != nil {
				return Internal("device: check user code", err)
			}
			if n == 0 {
				row := DeviceAuthorization{DeviceCodeHash: HashKey(deviceCode), UserCode: userCode, Status: DevicePending,
					Interval: DeviceInterval, ExpiresAt: now.Add(DeviceCodeTTL), CreatedAt: now}
				if err := tx.Create(&row).Error; err != nil {
					return Internal("device: create", err)
				}
				return nil
			}
		}
		return Internal("device: user code", errors.New("no free user code after 5 draws"))
	})
	if err != nil {
		return nil, err
	}
	uri := a.Config.BaseURL + DeviceVerificationPath
	return &DeviceStart{DeviceCode: deviceCode, UserCode: userCode, VerificationURI: uri,
		VerificationURIComplete: uri + "?user_code=" + url.QueryEscape(userCode),
		ExpiresIn:               int(DeviceCodeTTL.Seconds()), Interval: DeviceInterval}, nil
}

// PendingDevice returns the device authorization of a user code while it waits for a decision.
func (a *App) PendingDevice(ctx context.Context, userCode string) (*DeviceAuthorization, error) {
	var d DeviceAuthorization
	err := a.DB.WithContext(ctx).First(&d, "user_code = ?", NormalizeUserCode(userCode)).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound("code")
	}
	if err != nil {
		return nil, Internal("device: look up", err)
	}
	switch {
	case !a.Now().Before(d.ExpiresAt):
		return nil, Invalid("this code has expired: run `studio login` again")
	case d.Status != DevicePending:
		return nil, Conflict("this code was already used")
	}
	return &d, nil
}

// DecideDevice approves the device authorization of a user code on behalf of a personal account, or
// denies it (denying needs no account: whoever holds the code may refuse it).
func (a *App) DecideDevice(ctx context.Context, userCode, userID string, approve bool) error {
	update := map[string]any{"status": DeviceDenied, "user_id": nil}
	if approve {
		if userID == "" {
			return Unauthenticated("sign in to approve")
		}
		update = map[string]any{"status": DeviceApproved, "user_id": userID}
	}
	code := NormalizeUserCode(userCode)
	res := a.DB.WithContext(ctx).Model(&DeviceAuthorization{}).
		Where("user_code = ? AND status = ? AND expires_at > ?", code, DevicePending, a.Now()).Updates(update)
	if res.Error != nil {
		return Internal("device: decide", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	_, err := a.PendingDevice(ctx, code)
	if err == nil {
		err = Conflict("this code was already used")
	}
	return err
}

// deviceError is the RFC error of the device token endpoint: HTTP 400 with {"error": code}.
func deviceError(code string) *Error { return &Error{Kind: KindInvalid, Message: code} }

// PollDeviceToken answers a device's poll: the 7-day login token once approved (once only), otherwise the
// RFC 8628 error. Polling sooner than the interval answers slow_down and adds 5 s to the interval.
func (a *App) PollDeviceToken(ctx context.Context, deviceCode string) (*DeviceToken, error) {
	if deviceCode == "" {
		return nil, Invalid("device_code is required")
	}
	var userID, answer string
	// The transaction commits the poll time and interval also when the answer is an RFC error.
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var d DeviceAuthorization
		err := tx.First(&d, "device_code_hash = ?", HashKey(deviceCode)).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return deviceError(DeviceInvalidGrant)
		}
		if err != nil {
			return Internal("device: look up", err)
		}
		now := a.Now()
		switch {
		case d.Status == DeviceConsumed:
			return deviceError(DeviceInvalidGrant)
		case !now.Before(d.ExpiresAt):
			return deviceError(DeviceExpiredToken)
		}
		update := map[string]any{"last_poll_at": now}
		tooSoon := d.LastPollAt != nil && now.Sub(*d.LastPollAt) < time.Duration(d.Interval)*time.Second
		switch {
		case tooSoon:
			update["interval"] = d.Interval + deviceSlowDown
			answer = DeviceSlowDown
		case d.Status == DevicePending:
			answer = DeviceAuthorizationPending
		case d.Status == DeviceDenied:
			answer = DeviceAccessDenied
		default: // approved: hand out the token once
			update["status"] = DeviceConsumed
			userID = *d.UserID
		}
		res := tx.Model(&DeviceAuthorization{}).Where("device_code_hash = ? AND status = ?", d.DeviceCodeHash, d.Status).Updates(update)
		if res.Error != nil {
			return Internal("device: poll", res.Error)
		}
		if res.RowsAffected != 1 {
			return deviceError(DeviceInvalidGrant) // a concurrent poll consumed it
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if answer != "" {
		return nil, deviceError(answer)
	}
	var u User
	if err := a.DB.WithContext(ctx).First(&u, "id = ?", userID).Error; err != nil || u.Disabled {
		return nil, deviceError(DeviceAccessDenied)
	}
	tok, _, err := a.IssueUserToken(u.ID, LoginTTL)
	if err != nil {
		return nil, Internal("device: issue token", err)
	}
	return &DeviceToken{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int(LoginTTL.Seconds())}, nil
}

// ---- third-party sign-in (OpenID Connect) ----

// OIDCCallbackPath is the redirect URI, under SERVICE_BASE_URL, to register at the OpenID provider.
const OIDCCallbackPath = "/api/auth/oidc/callback"

// OIDCCookie names the signed cookie that carries state, nonce and PKCE verifier from start to callback.
const OIDCCookie = "studio_oidc"

// OIDCFlowTTL bounds the time between GET /api/auth/oidc/start and the callback.
const OIDCFlowTTL = 10 * time.Minute

// oidcHTTP talks to the configured provider (discovery, keys, token endpoint).
var oidcHTTP = &http.Client{Timeout: 15 * time.Second}

// oidcProviders caches each issuer's discovery document and keys, by issuer.
var oidcProviders sync.Map

// oidcProvider is the discovered configuration and signing keys of one issuer.
type oidcProvider struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	JWKSURI               string `json:"jwks_uri"`

	discovered time.Time
	mu         sync.Mutex
	keys       map[string]*rsa.PublicKey
	keysAt     time.Time
}

// oidcFlow is what the signed cookie carries between start and callback.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Return   string `json:"r,omitempty"`
	Expires  int64  `json:"e"`
}

// OIDCResult is a completed third-party sign-in: the login token, the user, and where the browser goes next.
type OIDCResult struct {
	Login  *LoginResult
	User   *User
	Return string
}

var errOIDCOff = &Error{Kind: KindNotFound, Message: "third-party sign-in is not configured on this server (SERVICE_OIDC_ISSUER)"}

// OIDCEnabled reports whether third-party sign-in is configured (SERVICE_OIDC_ISSUER and _CLIENT_ID).
func (a *App) OIDCEnabled() bool { return a.Config.OIDCIssuer != "" && a.Config.OIDCClientID != "" }

// SafeReturnPath reports whether p is a path on this site (no scheme, host or protocol-relative form).
func SafeReturnPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "/\\") &&
		len(p) <= 500 && !strings.ContainsAny(p, "\r\n\t\\")
}

// OIDCStart begins an authorization-code flow: it returns the provider URL to redirect to and the signed
// cookie value to set. returnPath, when a local path, is where the callback sends the browser afterwards
// with a session cookie; without one, the callback answers the login as JSON.
func (a *App) OIDCStart(ctx context.Context, returnPath string) (authURL, cookie string, err error) {
	if !a.OIDCEnabled() {
		return "", "", errOIDCOff
	}
	if returnPath != "" && !SafeReturnPath(returnPath) {
		return "", "", Invalid("return must be a path on this site")
	}
	p, err := a.oidcDiscover(ctx)
	if err != nil {
		return "", "", err
	}
	f := oidcFlow{State: RandomString(32, keyAlphabet), Nonce: RandomString(32, keyAlphabet), Verifier: RandomString(64, keyAlphabet),
		Return: returnPath, Expires: a.Now().Add(OIDCFlowTTL).Unix()}
	challenge := sha256.Sum256([]byte(f.Verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {a.Config.OIDCClientID},
		"redirect_uri":          {a.Config.BaseURL + OIDCCallbackPath},
		"scope":                 {"openid email profile"},
		"state":                 {f.State},
		"nonce":                 {f.Nonce},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(challenge[:])},
		"code_challenge_method": {"S256"},
	}
	sep := "?"
	if strings.Contains(p.AuthorizationEndpoint, "?") {
		sep = "&"
	}
	raw, _ := json.Marshal(f)
	payload := base64.RawURLEncoding.EncodeToString(raw)
	cookie = payload + "." + base64.RawURLEncoding.EncodeToString(Sign(a.Secret, "oidc-flow", []byte(payload)))
	return p.AuthorizationEndpoint + sep + q.Encode(), cookie, nil
}

// openFlow checks the cookie's signature and age and returns its flow.
func (a *App) openFlow(cookie string) (*oidcFlow, error) {
	bad := Unauthenticated("the sign-in attempt is unknown or too old: start again")
	payload, sig, ok := strings.Cut(cookie, ".")
	if !ok {
		return nil, bad
	}
	want := base64.RawURLEncoding.EncodeToString(Sign(a.Secret, "oidc-flow", []byte(payload)))
	if !EqualHash(sig, want) {
		return nil, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var f oidcFlow
	if err != nil || json.Unmarshal(raw, &f) != nil || a.Now().Unix() > f.Expires {
		return nil, bad
	}
	return &f, nil
}

// idClaims are the ID-token claims used to find or create the account.
type idClaims struct {
	jwt.RegisteredClaims
	Nonce             string `json:"nonce"`
	AZP               string `json:"azp"`
	Email             string `json:"email"`
	EmailVerified     any    `json:"email_verified"`
	Name              string `json:"name"`
	PreferredUsername string `json:"preferred_username"`
}

// OIDCCallback finishes the flow: it checks state against the cookie, exchanges the code at the token
// endpoint, verifies the ID token (RS256 signature from the JWKS; iss, aud, exp, nonce), then finds the
// account by subject, links it by verified e-mail, or creates it (open registration), and signs it in.
func (a *App) OIDCCallback(ctx context.Context, cookie, state, code string) (*OIDCResult, error) {
	if !a.OIDCEnabled() {
		return nil, errOIDCOff
	}
	f, err := a.openFlow(cookie)
	if err != nil {
		return nil, err
	}
	if state == "" || !EqualHash(state, f.State) {
		return nil, Unauthenticated("the sign-in state does not match: start again")
	}
	if code == "" {
		return nil, Invalid("code is missing from the provider's answer")
	}
	p, err := a.oidcDiscover(ctx)
	if err != nil {
		return nil, err
	}
	idToken, err := a.oidcExchange(ctx, p, code, f.Verifier)
	if err != nil {
		return nil, err
	}
	var c idClaims
	_, err = jwt.ParseWithClaims(idToken, &c, p.keyFunc(ctx), jwt.WithValidMethods([]string{"RS256"}),
		jwt.WithIssuer(p.Issuer), jwt.WithAudience(a.Config.OIDCClientID), jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.Now), jwt.WithLeeway(time.Minute))
	if err != nil {
		return nil, &Error{Kind: KindUnauthenticated, Message: "the provider's ID token is not valid", Err: err}
	}
	if !EqualHash(c.Nonce, f.Nonce) {
		return nil, Unauthenticated("the provider's ID token has the wrong nonce")
	}
	if c.AZP != "" && c.AZP != a.Config.OIDCClientID {
		return nil, Unauthenticated("the provider's ID token was issued to another client")
	}
	if c.Subject == "" {
		return nil, Unauthenticated("the provider's ID token has no subject")
	}
	u, err := a.oidcUser(ctx, p.Issuer, &c)
	if err != nil {
		return nil, err
	}
	login, err := a.loginResult(u)
	if err != nil {
		return nil, err
	}
	return &OIDCResult{Login: login, User: u, Return: f.Return}, nil
}

// oidcUser finds the account of an ID token's subject, links an existing account by verified e-mail, or
// creates one.
func (a *App) oidcUser(ctx context.Context, issuer string, c *idClaims) (*User, error) {
	subject := issuer + "|" + c.Subject
	if len(subject) > 300 {
		return nil, Invalid("the provider's subject is too long")
	}
	var u User
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		column := tx.NamingStrategy.ColumnName("", "OIDCSubject")
		err := tx.First(&u, column+" = ?", subject).Error
		if err == nil {
			return nil
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return Internal("oidc: look up subject", err)
		}
		verified := c.EmailVerified == true || c.EmailVerified == "true"
		email := NormalizeEmail(c.Email)
		if email == "" || !validEmail(email) {
			return Invalid("the provider did not share an e-mail address; allow the e-mail scope")
		}
		if !verified {
			return Forbidden("the provider has not verified the e-mail address " + email)
		}
		err = tx.First(&u, "email = ?", email).Error
		switch {
		case err == nil:
			if u.OIDCSubject != nil {
				return Conflict("this e-mail is linked to another third-party account")
			}
			u.OIDCSubject = &subject
			res := tx.Model(&User{}).Where("id = ? AND "+column+" IS NULL", u.ID).
				Updates(map[string]any{column: subject, "updated_at": a.Now()})
			if res.Error != nil {
				return Internal("oidc: link", res.Error)
			}
			if res.RowsAffected != 1 {
				return Conflict("this e-mail is linked to another third-party account")
			}
			return nil
		case !errors.Is(err, gorm.ErrRecordNotFound):
			return Internal("oidc: look up e-mail", err)
		}
		nickname := strings.TrimSpace(c.Name)
		if nickname == "" {
			nickname = strings.TrimSpace(c.PreferredUsername)
		}
		if nickname == "" {
			nickname = email[:strings.IndexByte(email, '@')]
		}
		if utf8.RuneCountInString(nickname) > 100 {
			nickname = string([]rune(nickname)[:100])
		}
		now := a.Now()
		u = User{ID: NewID(), Email: email, Nickname: nickname, OIDCSubject: &subject, CreatedAt: now, UpdatedAt: now}
		if err := tx.Create(&u).Error; err != nil {
			if isUniqueViolation(err) {
				return Conflict("this account was created meanwhile: sign in again")
			}
			return Internal("oidc: create user", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, Unauthenticated("this account is disabled")
	}
	return &u, nil
}

// oidcDiscover returns the issuer's discovery document, cached for an hour.
func (a *App) oidcDiscover(ctx context.Context) (*oidcProvider, error) {
	issuer := strings.TrimRight(a.Config.OIDCIssuer, "/")
	if v, ok := oidcProviders.Load(issuer); ok {
		if p := v.(*oidcProvider); time.Since(p.discovered) < time.Hour {
			return p, nil
		}
	}
	var p oidcProvider
	if err := oidcGetJSON(ctx, issuer+"/.well-known/openid-configuration", &p); err != nil {
		return nil, &Error{Kind: KindUnavailable, Message: "the sign-in provider is not answering; try again later", Err: fmt.Errorf("oidc: discovery: %w", err)}
	}
	if strings.TrimRight(p.Issuer, "/") != issuer || p.AuthorizationEndpoint == "" || p.TokenEndpoint == "" || p.JWKSURI == "" {
		return nil, Internal("oidc: discovery", fmt.Errorf("document of %s names issuer %q or lacks endpoints", issuer, p.Issuer))
	}
	p.discovered = time.Now()
	oidcProviders.Store(issuer, &p)
	return &p, nil
}

// oidcExchange trades an authorization code for the ID token at the token endpoint.
func (a *App) oidcExchange(ctx context.Context, p *oidcProvider, code, verifier string) (string, error) {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {a.Config.BaseURL + OIDCCallbackPath},
		"client_id": {a.Config.OIDCClientID}, "code_verifier": {verifier}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", Internal("oidc: token request", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(a.Config.OIDCClientID), url.QueryEscape(a.Config.OIDCClientSecret))
	res, err := oidcHTTP.Do(req)
	if err != nil {
		return "", &Error{Kind: KindUnavailable, Message: "the sign-in provider is not answering; try again later", Err: fmt.Errorf("oidc: token: %w", err)}
	}
	defer res.Body.Close()
	var out struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&out)
	if res.StatusCode != http.StatusOK || out.IDToken == "" {
		return "", &Error{Kind: KindUnauthenticated, Message: "the sign-in provider refused the authorization code: start again",
			Err: fmt.Errorf("oidc: token endpoint: %d %s", res.StatusCode, out.Error)}
	}
	return out.IDToken, nil
}

// keyFunc resolves the RSA key of a token's kid, fetching the JWKS again (at most every 30 s) for an unknown kid.
func (p *oidcProvider) keyFunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		p.mu.Lock()
		defer p.mu.Unlock()
		if k := p.pick(kid); k != nil {
			return k, nil
		}
		if time.Since(p.keysAt) < 30*time.Second && p.keys != nil {
			return nil, fmt.Errorf("unknown key id %q", kid)
		}
		keys, err := fetchJWKS(ctx, p.JWKSURI)
		if err != nil {
			return nil, err
		}
		p.keys, p.keysAt = keys, time.Now()
		if k := p.pick(kid); k != nil {
			return k, nil
		}
		return nil, fmt.Errorf("unknown key id %q", kid)
	}
}

// pick returns the key of kid, or the only key when the token names none.
func (p *oidcProvider) pick(kid string) *rsa.PublicKey {
	if k, ok := p.keys[kid]; ok {
		return k
	}
	if kid == "" && len(p.keys) == 1 {
		for _, k := range p.keys {
			return k
		}
	}
	return nil
}

// fetchJWKS reads the RSA signing keys of a JWK set.
func fetchJWKS(ctx context.Context, uri string) (map[string]*rsa.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Use, N, E string
		} `json:"keys"`
	}
	if err := oidcGetJSON(ctx, uri, &set); err != nil {
		return nil, fmt.Errorf("oidc: keys: %w", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			continue
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	return keys, nil
}

// oidcGetJSON GETs a JSON document of at most 1 MB.
func oidcGetJSON(ctx context.Context, uri string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	res, err := oidcHTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", uri, res.Status)
	}
	return json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(v)
}
