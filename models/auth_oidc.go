package models

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"studio/models/oidc"
)

// Third-party sign-in through OpenID Connect (authorization-code flow with PKCE). The protocol (discovery,
// authorization URL, code exchange, ID-token verification) is models/oidc; this file keeps the flow
// cookie and the rules: which account a verified identity is, linking, creation, sign-in.

// OIDCCallbackPath is the redirect URI, under SERVICE_BASE_URL, to register at the OpenID provider.
const OIDCCallbackPath = "/api/auth/oidc/callback"

// OIDCCookie names the signed cookie that carries state, nonce and PKCE verifier from start to callback.
const OIDCCookie = "studio_oidc"

// OIDCFlowTTL bounds the time between GET /api/auth/oidc/start and the callback.
const OIDCFlowTTL = 10 * time.Minute

// oidcClients holds the relying party of each App (*App → *oidcClient: a process has one App, a test a
// few), whose discovery document and key set are cached inside; it is made again when the configuration
// it was made from changes.
var oidcClients sync.Map

// oidcClient is an App's relying party and the configuration it was made from.
type oidcClient struct {
	config [4]string // issuer, client id, client secret, redirect URL
	client *oidc.Client
}

// oidcRP returns the App's relying party for the configured provider.
func (a *App) oidcRP() *oidc.Client {
	config := [4]string{a.Config.OIDCIssuer, a.Config.OIDCClientID, a.Config.OIDCClientSecret, a.Config.BaseURL + OIDCCallbackPath}
	if v, ok := oidcClients.Load(a); ok && v.(*oidcClient).config == config {
		return v.(*oidcClient).client
	}
	c := &oidcClient{config: config, client: oidc.New(oidc.Config{Issuer: config[0], ClientID: config[1], ClientSecret: config[2],
		RedirectURL: config[3], Now: func() time.Time { return a.Now() }})}
	oidcClients.Store(a, c)
	return c.client
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
func (au *AuthService) OIDCEnabled() bool {
	return au.a.Config.OIDCIssuer != "" && au.a.Config.OIDCClientID != ""
}

// SafeReturnPath reports whether p is a path on this site (no scheme, host or protocol-relative form).
func SafeReturnPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "/\\") &&
		len(p) <= 500 && !strings.ContainsAny(p, "\r\n\t\\")
}

// OIDCStart begins an authorization-code flow: it returns the provider URL to redirect to and the signed
// cookie value to set. returnPath, when a local path, is where the callback sends the browser afterwards
// with a session cookie; without one, the callback answers the login as JSON.
func (au *AuthService) OIDCStart(ctx context.Context, returnPath string) (authURL, cookie string, err error) {
	a := au.a
	if !a.Auth().OIDCEnabled() {
		return "", "", errOIDCOff
	}
	if returnPath != "" && !SafeReturnPath(returnPath) {
		return "", "", Invalid("return must be a path on this site")
	}
	rp := a.oidcRP()
	fl := oidc.NewFlow()
	authURL, err = rp.AuthCodeURL(ctx, fl)
	if err != nil {
		return "", "", oidcError(err)
	}
	f := oidcFlow{State: fl.State, Nonce: fl.Nonce, Verifier: fl.Verifier, Return: returnPath, Expires: a.Now().Add(OIDCFlowTTL).Unix()}
	raw, _ := json.Marshal(f)
	payload := base64.RawURLEncoding.EncodeToString(raw)
	cookie = payload + "." + base64.RawURLEncoding.EncodeToString(Sign(a.secret, "oidc-flow", []byte(payload)))
	return authURL, cookie, nil
}

// openFlow checks the cookie's signature and age and returns its flow.
func (a *App) openFlow(cookie string) (*oidcFlow, error) {
	bad := Unauthenticated("the sign-in attempt is unknown or too old: start again")
	payload, sig, ok := strings.Cut(cookie, ".")
	if !ok {
		return nil, bad
	}
	want := base64.RawURLEncoding.EncodeToString(Sign(a.secret, "oidc-flow", []byte(payload)))
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

// OIDCCallback finishes the flow: it checks state against the cookie, exchanges the code at the token
// endpoint and verifies the ID token (models/oidc: signature from the provider's key set; iss, aud, exp,
// nonce), then finds the account by subject, links it by verified e-mail, or creates it (open
// registration), and signs it in.
func (au *AuthService) OIDCCallback(ctx context.Context, cookie, state, code string) (*OIDCResult, error) {
	a := au.a
	if !a.Auth().OIDCEnabled() {
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
	id, err := a.oidcRP().Exchange(ctx, code, oidc.Flow{State: f.State, Nonce: f.Nonce, Verifier: f.Verifier})
	if err != nil {
		return nil, oidcError(err)
	}
	u, err := a.oidcUser(ctx, id)
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
func (a *App) oidcUser(ctx context.Context, c *oidc.Identity) (*User, error) {
	subject := c.Issuer + "|" + c.Subject
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
		email := NormalizeEmail(c.Email)
		if email == "" || !validEmail(email) {
			return Invalid("the provider did not share an e-mail address; allow the e-mail scope")
		}
		if !c.EmailVerified {
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

// oidcError turns an error of the relying party into the error shown to the person signing in.
func oidcError(err error) error {
	switch {
	case errors.Is(err, oidc.ErrUnavailable):
		return &Error{Kind: KindUnavailable, Message: "the sign-in provider is not answering; try again later", Err: err}
	case errors.Is(err, oidc.ErrCodeRefused):
		return &Error{Kind: KindUnauthenticated, Message: "the sign-in provider refused the authorization code: start again", Err: err}
	case errors.Is(err, oidc.ErrInvalidToken):
		return &Error{Kind: KindUnauthenticated, Message: "the provider's ID token is not valid", Err: err}
	case errors.Is(err, oidc.ErrWrongNonce):
		return Unauthenticated("the provider's ID token has the wrong nonce")
	case errors.Is(err, oidc.ErrOtherClient):
		return Unauthenticated("the provider's ID token was issued to another client")
	case errors.Is(err, oidc.ErrNoSubject):
		return Unauthenticated("the provider's ID token has no subject")
	default: // oidc.ErrMisconfigured
		return Internal("oidc: discovery", err)
	}
}
