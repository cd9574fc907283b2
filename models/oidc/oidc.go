// Package oidc is the relying party of third-party sign-in: OpenID Connect discovery, the authorization
// URL (state, nonce, PKCE S256), the code exchange and the verification of the ID token, on
// github.com/coreos/go-oidc and golang.org/x/oauth2. It knows nothing of accounts or sessions: the core
// (models/auth_oidc.go) keeps a Flow between start and callback and maps the verified Identity to an
// account. It imports nothing of studio.
package oidc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

const (
	// DiscoveryTTL is how long a discovery document is used before it is read again.
	DiscoveryTTL = time.Hour
	// KeyRefetchInterval spaces the fetches of the key set: a token whose key is not in the cached set
	// makes one fetch at most this often (a key that is cached is never waited for).
	KeyRefetchInterval = 30 * time.Second
	// Leeway is the clock skew allowed on the ID token's exp and nbf.
	Leeway = time.Minute
	// Timeout bounds each request to the provider.
	Timeout = 15 * time.Second
	// MaxBody bounds each answer read from the provider (discovery, keys, token endpoint).
	MaxBody = 1 << 20
)

// Scopes are the scopes asked for: the subject, the e-mail address and the name.
var Scopes = []string{gooidc.ScopeOpenID, gooidc.ScopeEmail, gooidc.ScopeProfile}

// algorithms are the signature algorithms accepted when the provider's discovery document names none:
// every asymmetric algorithm go-oidc verifies (never HS256 or none).
var algorithms = []string{gooidc.RS256, gooidc.RS384, gooidc.RS512, gooidc.ES256, gooidc.ES384, gooidc.ES512,
	gooidc.PS256, gooidc.PS384, gooidc.PS512, gooidc.EdDSA}

// Errors of the client; the returned errors wrap one of them with the details.
var (
	// ErrUnavailable: the provider did not answer (discovery, or the token endpoint unreachable).
	ErrUnavailable = errors.New("oidc: the provider is not answering")
	// ErrMisconfigured: the discovery document names another issuer or lacks an endpoint.
	ErrMisconfigured = errors.New("oidc: the discovery document does not fit the configured issuer")
	// ErrCodeRefused: the token endpoint refused the code (or answered no ID token).
	ErrCodeRefused = errors.New("oidc: the token endpoint refused the authorization code")
	// ErrInvalidToken: signature, algorithm, issuer, audience, expiry or not-before of the ID token.
	ErrInvalidToken = errors.New("oidc: the ID token is not valid")
	// ErrWrongNonce: the ID token is not the answer to this flow.
	ErrWrongNonce = errors.New("oidc: the ID token has the wrong nonce")
	// ErrOtherClient: the ID token names another authorized party (azp).
	ErrOtherClient = errors.New("oidc: the ID token was issued to another client")
	// ErrNoSubject: the ID token has no sub.
	ErrNoSubject = errors.New("oidc: the ID token has no subject")
)

// Config is what the client needs of the service's configuration.
type Config struct {
	// Issuer is the provider's issuer URL; a trailing slash is ignored when it is matched against the
	// issuer of the discovery document.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is the callback registered at the provider.
	RedirectURL string
	// Now is the clock of the ID token's times, of the discovery document's age and of the key refetch
	// spacing; nil means time.Now.
	Now func() time.Time
}

// Flow is one sign-in attempt's secrets, kept by the caller (in a signed cookie) from the authorization
// URL to the callback.
type Flow struct {
	State    string // returned by the provider with the code; the caller compares it
	Nonce    string // must come back inside the ID token
	Verifier string // PKCE code verifier; the authorization URL carries its S256 challenge
}

// NewFlow returns fresh random secrets (256 bits each).
func NewFlow() Flow {
	return Flow{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier()}
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Identity is a verified ID token's subject and the claims studio uses.
type Identity struct {
	Issuer            string // the issuer of the discovery document, which the token's iss matched
	Subject           string
	Email             string
	EmailVerified     bool // email_verified true (or the string "true")
	Name              string
	PreferredUsername string
}

// Client is the relying party of one provider and one client id. It reads the discovery document on
// first use (again after DiscoveryTTL) and keeps the provider's keys in a go-oidc RemoteKeySet; it is
// safe for concurrent use and meant to live as long as its configuration.
type Client struct {
	cfg    Config
	issuer string       // cfg.Issuer without its trailing slash
	http   *http.Client // every request but the key set's: bounded in time and size
	state  atomic.Pointer[discovered]
}

// discovered is one reading of the discovery document and what is built from it.
type discovered struct {
	at       time.Time
	issuer   string // as the document writes it: the iss of every ID token
	endpoint oauth2.Endpoint
	jwksURI  string
	keys     *gooidc.RemoteKeySet
	verifier *gooidc.IDTokenVerifier
}

// New returns a client; it makes no request before the first AuthCodeURL or Exchange.
func New(cfg Config) *Client {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg, issuer: strings.TrimRight(cfg.Issuer, "/"),
		http: &http.Client{Timeout: Timeout, Transport: limitBody{http.DefaultTransport}}}
}

// AuthCodeURL returns the provider's authorization URL for f: response_type=code, the client id, the
// redirect URL, the scopes, state, nonce and the S256 challenge of f's verifier.
func (c *Client) AuthCodeURL(ctx context.Context, f Flow) (string, error) {
	d, err := c.discover(ctx)
	if err != nil {
		return "", err
	}
	return c.oauth2(d).AuthCodeURL(f.State, gooidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), nil
}

// Exchange trades the code for tokens at the token endpoint (client secret by HTTP Basic, f's PKCE
// verifier) and verifies the ID token: signature by a key of the provider's set with an algorithm the
// provider signs with, iss, aud, exp and nbf (Leeway), then f's nonce, azp and sub. The caller checks
// the state before.
func (c *Client) Exchange(ctx context.Context, code string, f Flow) (*Identity, error) {
	d, err := c.discover(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := c.oauth2(d).Exchange(gooidc.ClientContext(ctx, c.http), code, oauth2.VerifierOption(f.Verifier),
		oauth2.SetAuthURLParam("client_id", c.cfg.ClientID))
	if err != nil {
		var transport *url.Error
		if errors.As(err, &transport) {
			return nil, fmt.Errorf("%w: token endpoint: %w", ErrUnavailable, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrCodeRefused, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, fmt.Errorf("%w: the answer has no id_token", ErrCodeRefused)
	}
	return c.verify(ctx, d, raw, f.Nonce)
}

// verify checks a raw ID token against the discovered provider and the flow's nonce.
func (c *Client) verify(ctx context.Context, d *discovered, raw, nonce string) (*Identity, error) {
	t, err := d.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	var claims struct {
		NotBefore         *json.Number `json:"nbf"`
		AZP               string       `json:"azp"`
		Email             string       `json:"email"`
		EmailVerified     any          `json:"email_verified"`
		Name              string       `json:"name"`
		PreferredUsername string       `json:"preferred_username"`
	}
	if err := t.Claims(&claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %w", ErrInvalidToken, err)
	}
	if claims.NotBefore != nil {
		nbf, err := claims.NotBefore.Float64()
		if err != nil || c.cfg.Now().Add(Leeway).Before(time.Unix(int64(nbf), 0)) {
			return nil, fmt.Errorf("%w: not valid before %s", ErrInvalidToken, claims.NotBefore)
		}
	}
	if nonce == "" || subtle.ConstantTimeCompare([]byte(t.Nonce), []byte(nonce)) != 1 {
		return nil, ErrWrongNonce
	}
	if claims.AZP != "" && claims.AZP != c.cfg.ClientID {
		return nil, fmt.Errorf("%w: azp %q", ErrOtherClient, claims.AZP)
	}
	if t.Subject == "" {
		return nil, ErrNoSubject
	}
	return &Identity{Issuer: d.issuer, Subject: t.Subject, Email: claims.Email,
		EmailVerified: claims.EmailVerified == true || claims.EmailVerified == "true",
		Name:          claims.Name, PreferredUsername: claims.PreferredUsername}, nil
}

// oauth2 is the OAuth 2.0 configuration of a discovered provider.
func (c *Client) oauth2(d *discovered) *oauth2.Config {
	return &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, Endpoint: d.endpoint,
		RedirectURL: c.cfg.RedirectURL, Scopes: Scopes}
}

// discover returns the provider's discovery document, read again once it is DiscoveryTTL old. No lock
// is held while it is read: callers that find it stale at the same moment each read it.
func (c *Client) discover(ctx context.Context) (*discovered, error) {
	now := c.cfg.Now()
	old := c.state.Load()
	if old != nil && now.Sub(old.at) < DiscoveryTTL {
		return old, nil
	}
	pctx := gooidc.ClientContext(ctx, c.http)
	p, err := gooidc.NewProvider(pctx, c.issuer)
	var mismatch *gooidc.IssuerMismatchError
	if errors.As(err, &mismatch) && strings.TrimRight(mismatch.Discovered, "/") == c.issuer {
		// The document writes the issuer with a trailing slash: that is the issuer of its tokens.
		p, err = gooidc.NewProvider(pctx, mismatch.Discovered)
	}
	if errors.As(err, &mismatch) {
		return nil, fmt.Errorf("%w: %w", ErrMisconfigured, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: discovery: %w", ErrUnavailable, err)
	}
	var meta struct {
		Issuer     string   `json:"issuer"`
		JWKSURI    string   `json:"jwks_uri"`
		Algorithms []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, fmt.Errorf("%w: discovery: %w", ErrUnavailable, err)
	}
	d := &discovered{at: now, issuer: meta.Issuer, endpoint: p.Endpoint(), jwksURI: meta.JWKSURI}
	if d.endpoint.AuthURL == "" || d.endpoint.TokenURL == "" || d.jwksURI == "" {
		return nil, fmt.Errorf("%w: the document of %s lacks authorization_endpoint, token_endpoint or jwks_uri", ErrMisconfigured, c.issuer)
	}
	d.endpoint.AuthStyle = oauth2.AuthStyleInHeader
	if old != nil && old.jwksURI == d.jwksURI {
		d.keys = old.keys // the cached keys outlive a new reading of the same document
	} else {
		d.keys = gooidc.NewRemoteKeySet(gooidc.ClientContext(context.Background(), &http.Client{Timeout: Timeout,
			Transport: &refetchLimit{base: c.http.Transport, now: c.cfg.Now, every: KeyRefetchInterval}}), d.jwksURI)
	}
	d.verifier = gooidc.NewVerifier(d.issuer, d.keys, &gooidc.Config{ClientID: c.cfg.ClientID,
		SupportedSigningAlgs: signingAlgorithms(meta.Algorithms),
		Now:                  func() time.Time { return c.cfg.Now().Add(-Leeway) }})
	c.state.Store(d)
	return d, nil
}

// signingAlgorithms are the algorithms the provider says it signs ID tokens with, among those go-oidc
// verifies; all of those when it says none. Nil (go-oidc's default, RS256) when it names only others.
func signingAlgorithms(advertised []string) []string {
	if len(advertised) == 0 {
		return algorithms
	}
	var out []string
	for _, a := range advertised {
		if slices.Contains(algorithms, a) {
			out = append(out, a)
		}
	}
	return out
}
