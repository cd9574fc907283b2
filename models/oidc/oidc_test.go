package oidc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const clientID, clientSecret, redirect = "studio-client", "studio secret/+", "https://studio.example/api/auth/oidc/callback"

// provider is a stand-in OpenID provider on loopback: discovery, key set and token endpoint. The token
// endpoint answers, for a code, the ID token the test stored under it.
type provider struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	doc      map[string]any                   // the discovery document
	keys     []map[string]any                 // the published key set
	tokens   map[string]string                // code → id_token
	forms    []url.Values                     // the token requests' forms
	auths    [][2]string                      // and their Basic credentials
	jwksGate chan struct{}                    // when set, key set requests wait for it to close
	jwksHook func(w http.ResponseWriter) bool // answers a key set request instead, when it returns true
	waiting  chan struct{}

	discoveries, jwksFetches atomic.Int32
}

func newProvider(t *testing.T) *provider {
	t.Helper()
	p := &provider{t: t, tokens: map[string]string{}, waiting: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		p.discoveries.Add(1)
		p.mu.Lock()
		defer p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.doc)
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		p.jwksFetches.Add(1)
		p.mu.Lock()
		gate, hook := p.jwksGate, p.jwksHook
		p.mu.Unlock()
		if gate != nil {
			p.waiting <- struct{}{}
			<-gate
		}
		if hook != nil && hook(w) {
			return
		}
		p.mu.Lock()
		keys := p.keys
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		p.mu.Lock()
		p.forms = append(p.forms, r.PostForm)
		p.auths = append(p.auths, [2]string{id, secret})
		tok, ok := p.tokens[r.PostForm.Get("code")]
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": "invalid_grant"})
			return
		}
		answer := map[string]any{"access_token": "at", "token_type": "Bearer"}
		if tok != "" {
			answer["id_token"] = tok
		}
		_ = json.NewEncoder(w).Encode(answer)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.doc = map[string]any{"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize",
		"token_endpoint": p.srv.URL + "/token", "jwks_uri": p.srv.URL + "/jwks"}
	return p
}

// publish sets the key set the provider serves.
func (p *provider) publish(keys ...map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = keys
}

// grant stores the ID token the token endpoint answers for code.
func (p *provider) grant(code, idToken string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens[code] = idToken
}

// holdKeys makes key set requests wait until the returned release is called.
func (p *provider) holdKeys() (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gate := make(chan struct{})
	p.jwksGate = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.jwksGate = nil
			p.mu.Unlock()
			close(gate)
		})
	}
}

// signer is a provider key: its private half, its kid and its JWK.
type signer struct {
	key crypto.Signer
	kid string
}

func rsaKey(t *testing.T, kid string) signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signer{k, kid}
}

func ecKey(t *testing.T, kid string) signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{k, kid}
}

// jwk is the public key as the provider publishes it.
func (s signer) jwk() map[string]any {
	switch k := s.key.(type) {
	case *rsa.PrivateKey:
		return map[string]any{"kty": "RSA", "kid": s.kid, "use": "sig", "alg": "RS256",
			"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PrivateKey:
		point, _ := k.PublicKey.Bytes()
		return map[string]any{"kty": "EC", "kid": s.kid, "use": "sig", "alg": "ES256", "crv": "P-256",
			"x": base64.RawURLEncoding.EncodeToString(point[1:33]), "y": base64.RawURLEncoding.EncodeToString(point[33:])}
	}
	panic("unknown key type")
}

// sign returns an ID token of claims signed by s (RS256 or ES256, by the key's type).
func (s signer) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	var m jwt.SigningMethod = jwt.SigningMethodRS256
	if _, ec := s.key.(*ecdsa.PrivateKey); ec {
		m = jwt.SigningMethodES256
	}
	tok := jwt.NewWithClaims(m, claims)
	tok.Header["kid"] = s.kid
	raw, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// claims are valid ID-token claims of p for flow f at now.
func (p *provider) claims(f Flow, now time.Time) jwt.MapClaims {
	return jwt.MapClaims{"iss": p.srv.URL, "aud": clientID, "sub": "alice-1", "exp": now.Add(5 * time.Minute).Unix(),
		"iat": now.Unix(), "nonce": f.Nonce, "email": "alice@example.com", "email_verified": true, "name": "Alice",
		"preferred_username": "al"}
}

// clock is a test clock.
type clock struct{ at atomic.Int64 }

func newClock() *clock                   { c := &clock{}; c.at.Store(time.Now().UnixNano()); return c }
func (c *clock) now() time.Time          { return time.Unix(0, c.at.Load()) }
func (c *clock) advance(d time.Duration) { c.at.Add(int64(d)) }

func (p *provider) client(c *clock) *Client {
	return New(Config{Issuer: p.srv.URL, ClientID: clientID, ClientSecret: clientSecret, RedirectURL: redirect, Now: c.now})
}

// signIn runs one exchange of a token made by sign from a fresh flow's claims (edited by edit).
func (p *provider) signIn(c *Client, now time.Time, s signer, edit func(jwt.MapClaims)) (*Identity, error) {
	p.t.Helper()
	f := NewFlow()
	claims := p.claims(f, now)
	if edit != nil {
		edit(claims)
	}
	code := random()
	p.grant(code, s.sign(p.t, claims))
	return c.Exchange(context.Background(), code, f)
}

func TestAuthCodeURL(t *testing.T) {
	p := newProvider(t)
	p.doc["authorization_endpoint"] = p.srv.URL + "/authorize?tenant=x"
	c := p.client(newClock())
	f := NewFlow()
	raw, err := c.AuthCodeURL(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil || !strings.HasPrefix(raw, p.srv.URL+"/authorize?tenant=x&") {
		t.Fatalf("authorization URL %s: %v", raw, err)
	}
	sum := sha256.Sum256([]byte(f.Verifier))
	want := map[string]string{"response_type": "code", "client_id": clientID, "redirect_uri": redirect, "scope": "openid email profile",
		"state": f.State, "nonce": f.Nonce, "code_challenge": base64.RawURLEncoding.EncodeToString(sum[:]), "code_challenge_method": "S256", "tenant": "x"}
	q := u.Query()
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	if q.Has("code_verifier") || len(q) != len(want) {
		t.Errorf("authorization URL has other parameters: %s", raw)
	}
	g := NewFlow()
	if len(f.State) < 43 || len(f.Nonce) < 43 || len(f.Verifier) < 43 || f.State == g.State || f.Nonce == g.Nonce || f.Verifier == g.Verifier || f.State == f.Nonce {
		t.Fatalf("flows %+v and %+v are not fresh random values", f, g)
	}
}

// TestExchange: RS256 and ES256 tokens (the discovery document names no algorithm) give the identity;
// the token request carries the client's credentials by HTTP Basic and the PKCE verifier.
func TestExchange(t *testing.T) {
	for _, s := range []signer{rsaKey(t, "r1"), ecKey(t, "e1")} {
		t.Run(s.jwk()["alg"].(string), func(t *testing.T) {
			p := newProvider(t)
			p.publish(s.jwk())
			clk := newClock()
			c := p.client(clk)
			f := NewFlow()
			claims := p.claims(f, clk.now())
			claims["email_verified"] = "true"
			p.grant("code-1", s.sign(t, claims))
			id, err := c.Exchange(context.Background(), "code-1", f)
			if err != nil {
				t.Fatal(err)
			}
			want := Identity{Issuer: p.srv.URL, Subject: "alice-1", Email: "alice@example.com", EmailVerified: true, Name: "Alice", PreferredUsername: "al"}
			if *id != want {
				t.Fatalf("identity = %+v, want %+v", *id, want)
			}
			form, auth := p.forms[0], p.auths[0]
			if auth != [2]string{url.QueryEscape(clientID), url.QueryEscape(clientSecret)} || form.Get("grant_type") != "authorization_code" ||
				form.Get("code") != "code-1" || form.Get("code_verifier") != f.Verifier || form.Get("redirect_uri") != redirect ||
				form.Get("client_id") != clientID || form.Has("client_secret") {
				t.Fatalf("token request: basic %q, form %v", auth, form)
			}
		})
	}
}

// TestRefusedTokens: each check of the ID token refuses with its error.
func TestRefusedTokens(t *testing.T) {
	p := newProvider(t)
	good, foreign := ecKey(t, "e1"), ecKey(t, "e1")
	p.publish(good.jwk(), rsaKey(t, "r1").jwk())
	clk := newClock()
	c := p.client(clk)
	now := clk.now()
	hs := func(t *testing.T, claims jwt.MapClaims) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
		tok.Header["kid"] = "e1"
		raw, _ := tok.SignedString([]byte(clientSecret))
		return raw
	}
	for _, tc := range []struct {
		name string
		s    signer
		edit func(jwt.MapClaims)
		raw  func(*testing.T, jwt.MapClaims) string
		want error
	}{
		{"valid", good, nil, nil, nil},
		{"foreign key", foreign, nil, nil, ErrInvalidToken},
		{"wrong audience", good, func(c jwt.MapClaims) { c["aud"] = "someone-else" }, nil, ErrInvalidToken},
		{"audience among others", good, func(c jwt.MapClaims) { c["aud"] = []string{"someone-else", clientID} }, nil, nil},
		{"wrong issuer", good, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }, nil, ErrInvalidToken},
		{"expired", good, func(c jwt.MapClaims) { c["exp"] = now.Add(-2 * time.Minute).Unix() }, nil, ErrInvalidToken},
		{"expired within the leeway", good, func(c jwt.MapClaims) { c["exp"] = now.Add(-30 * time.Second).Unix() }, nil, nil},
		{"no expiry", good, func(c jwt.MapClaims) { delete(c, "exp") }, nil, ErrInvalidToken},
		{"not yet valid", good, func(c jwt.MapClaims) { c["nbf"] = now.Add(2 * time.Minute).Unix() }, nil, ErrInvalidToken},
		{"not yet valid within the leeway", good, func(c jwt.MapClaims) { c["nbf"] = now.Add(30 * time.Second).Unix() }, nil, nil},
		{"wrong nonce", good, func(c jwt.MapClaims) { c["nonce"] = "other" }, nil, ErrWrongNonce},
		{"no nonce", good, func(c jwt.MapClaims) { delete(c, "nonce") }, nil, ErrWrongNonce},
		{"other authorized party", good, func(c jwt.MapClaims) { c["azp"] = "another-client" }, nil, ErrOtherClient},
		{"this authorized party", good, func(c jwt.MapClaims) { c["azp"] = clientID }, nil, nil},
		{"no subject", good, func(c jwt.MapClaims) { delete(c, "sub") }, nil, ErrNoSubject},
		{"HS256 with the client secret", good, nil, hs, ErrInvalidToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlow()
			claims := p.claims(f, now)
			if tc.edit != nil {
				tc.edit(claims)
			}
			raw := tc.s.sign(t, claims)
			if tc.raw != nil {
				raw = tc.raw(t, claims)
			}
			code := random()
			p.grant(code, raw)
			id, err := c.Exchange(context.Background(), code, f)
			if tc.want == nil && (err != nil || id.Subject != "alice-1") {
				t.Fatalf("refused: %v", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// A token endpoint that refuses the code, or answers no ID token.
	if _, err := c.Exchange(context.Background(), "unknown", NewFlow()); !errors.Is(err, ErrCodeRefused) {
		t.Fatalf("refused code: %v", err)
	}
	p.grant("no-id-token", "")
	if _, err := c.Exchange(context.Background(), "no-id-token", NewFlow()); !errors.Is(err, ErrCodeRefused) {
		t.Fatalf("answer without id_token: %v", err)
	}
}

// TestAdvertisedAlgorithms: a provider that names its algorithms has its tokens checked against them.
func TestAdvertisedAlgorithms(t *testing.T) {
	p := newProvider(t)
	p.doc["id_token_signing_alg_values_supported"] = []string{"RS256", "HS256"}
	rs, ec := rsaKey(t, "r1"), ecKey(t, "e1")
	p.publish(rs.jwk(), ec.jwk())
	clk := newClock()
	c := p.client(clk)
	if _, err := p.signIn(c, clk.now(), rs, nil); err != nil {
		t.Fatalf("RS256: %v", err)
	}
	if _, err := p.signIn(c, clk.now(), ec, nil); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("ES256 from a provider that signs with RS256 only: %v", err)
	}
}

// TestDiscovery: the issuer is matched with or without a trailing slash, the document is read once an
// hour (the keys are kept when it names the same key set), and its failures have their errors.
func TestDiscovery(t *testing.T) {
	s := ecKey(t, "e1")
	t.Run("configured with a trailing slash", func(t *testing.T) {
		p := newProvider(t)
		p.publish(s.jwk())
		clk := newClock()
		c := New(Config{Issuer: p.srv.URL + "/", ClientID: clientID, RedirectURL: redirect, Now: clk.now})
		if id, err := p.signIn(c, clk.now(), s, nil); err != nil || id.Issuer != p.srv.URL {
			t.Fatalf("identity %+v: %v", id, err)
		}
	})
	t.Run("document with a trailing slash", func(t *testing.T) {
		p := newProvider(t)
		p.publish(s.jwk())
		p.doc["issuer"] = p.srv.URL + "/"
		clk := newClock()
		c := p.client(clk)
		id, err := p.signIn(c, clk.now(), s, func(c jwt.MapClaims) { c["iss"] = p.srv.URL + "/" })
		if err != nil || id.Issuer != p.srv.URL+"/" {
			t.Fatalf("identity %+v: %v", id, err)
		}
		if _, err := p.signIn(c, clk.now(), s, nil); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("a token whose iss lacks the document's slash: %v", err)
		}
	})
	t.Run("cached for an hour", func(t *testing.T) {
		p := newProvider(t)
		p.publish(s.jwk())
		clk := newClock()
		c := p.client(clk)
		for range 3 {
			if _, err := p.signIn(c, clk.now(), s, nil); err != nil {
				t.Fatal(err)
			}
		}
		clk.advance(DiscoveryTTL + time.Second)
		if _, err := p.signIn(c, clk.now(), s, nil); err != nil {
			t.Fatal(err)
		}
		if d, k := p.discoveries.Load(), p.jwksFetches.Load(); d != 2 || k != 1 {
			t.Fatalf("%d discoveries and %d key set fetches, want 2 and 1", d, k)
		}
	})
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}
	for _, tc := range []struct {
		name string
		edit func(p *provider, c *Config)
		want error
	}{
		{"not answering", func(p *provider, c *Config) { c.Issuer = closed() }, ErrUnavailable},
		{"not found", func(p *provider, c *Config) { c.Issuer = p.srv.URL + "/tenant" }, ErrUnavailable},
		{"too large", func(p *provider, c *Config) { p.doc["padding"] = strings.Repeat("x", MaxBody) }, ErrUnavailable},
		{"another issuer", func(p *provider, c *Config) { p.doc["issuer"] = "https://evil.example" }, ErrMisconfigured},
		{"no key set", func(p *provider, c *Config) { delete(p.doc, "jwks_uri") }, ErrMisconfigured},
		{"no token endpoint", func(p *provider, c *Config) { delete(p.doc, "token_endpoint") }, ErrMisconfigured},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t)
			cfg := Config{Issuer: p.srv.URL, ClientID: clientID, RedirectURL: redirect}
			tc.edit(p, &cfg)
			c := New(cfg)
			if _, err := c.AuthCodeURL(context.Background(), NewFlow()); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, err := c.Exchange(context.Background(), "code", NewFlow()); !errors.Is(err, tc.want) {
				t.Fatalf("exchange: err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("token endpoint not answering", func(t *testing.T) {
		p := newProvider(t)
		p.doc["token_endpoint"] = closed() + "/token"
		if _, err := p.client(newClock()).Exchange(context.Background(), "code", NewFlow()); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want %v", err, ErrUnavailable)
		}
	})
}

// TestKeyRotation: a token signed with a key that is not cached makes the key set be fetched again, at
// most every KeyRefetchInterval after a fetch that succeeded.
func TestKeyRotation(t *testing.T) {
	p := newProvider(t)
	k1, k2, k3 := rsaKey(t, "k1"), ecKey(t, "k2"), ecKey(t, "k3")
	p.publish(k1.jwk())
	clk := newClock()
	c := p.client(clk)
	if _, err := p.signIn(c, clk.now(), k1, nil); err != nil {
		t.Fatal(err)
	}
	p.publish(k2.jwk())
	if _, err := p.signIn(c, clk.now(), k2, nil); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("new key within the interval: %v", err)
	}
	if n := p.jwksFetches.Load(); n != 1 {
		t.Fatalf("%d key set fetches within the interval, want 1", n)
	}
	clk.advance(KeyRefetchInterval)
	if _, err := p.signIn(c, clk.now(), k2, nil); err != nil {
		t.Fatalf("new key after the interval: %v", err)
	}
	if _, err := p.signIn(c, clk.now(), k1, nil); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("the key the provider dropped: %v", err)
	}
	// A fetch that fails does not count: the next token with a new key fetches again.
	p.publish(k2.jwk(), k3.jwk())
	clk.advance(KeyRefetchInterval)
	p.mu.Lock()
	p.jwksHook = func(w http.ResponseWriter) bool { w.WriteHeader(http.StatusBadGateway); return true }
	p.mu.Unlock()
	if _, err := p.signIn(c, clk.now(), k3, nil); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("new key while the key set fails: %v", err)
	}
	p.mu.Lock()
	p.jwksHook = nil
	p.mu.Unlock()
	if _, err := p.signIn(c, clk.now(), k3, nil); err != nil {
		t.Fatalf("new key once the key set answers: %v", err)
	}
	// k1, k2 after the interval, the failed one, k3: the others were refused without a request.
	if n := p.jwksFetches.Load(); n != 4 {
		t.Fatalf("%d key set fetches, want 4", n)
	}
}

// TestCachedKeyDoesNotWaitForRefetch: while the key set is being fetched again for new keys and the
// provider is slow, tokens whose key is cached are verified at once; the tokens that wait for the
// new keys make one request in all.
func TestCachedKeyDoesNotWaitForRefetch(t *testing.T) {
	p := newProvider(t)
	k1, k2 := rsaKey(t, "k1"), ecKey(t, "k2")
	p.publish(k1.jwk())
	clk := newClock()
	c := p.client(clk)
	if _, err := p.signIn(c, clk.now(), k1, nil); err != nil {
		t.Fatal(err)
	}
	p.publish(k1.jwk(), k2.jwk())
	clk.advance(KeyRefetchInterval)
	release := p.holdKeys()
	defer release()

	const waiters = 3
	done := make(chan error, waiters)
	for range waiters {
		f := NewFlow()
		code := random()
		p.grant(code, k2.sign(t, p.claims(f, clk.now())))
		go func() {
			_, err := c.Exchange(context.Background(), code, f)
			done <- err
		}()
	}
	select {
	case <-p.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the new key did not make the key set be fetched")
	}
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		f := NewFlow()
		code := random()
		p.grant(code, k1.sign(t, p.claims(f, clk.now())))
		_, err := c.Exchange(ctx, code, f)
		cancel()
		if err != nil {
			t.Fatalf("cached key #%d while the key set is being fetched: %v", i, err)
		}
	}
	release()
	for range waiters {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("new key: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a sign-in with the new key did not finish")
		}
	}
	if n := p.jwksFetches.Load(); n != 2 {
		t.Fatalf("%d key set fetches, want 2", n)
	}
}
