package models

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"gorm.io/gorm"
)

// Third-party sign-in through OpenID Connect (authorization-code flow with PKCE).

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
