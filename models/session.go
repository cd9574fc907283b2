package models

import (
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Console sessions: the browser surface signs a person in with a credential and keeps a server-side
// session (the Session table) named by a random cookie value, of which only the SHA-256 is stored.
//
//   - A session is opened with an API key (tenant, member account or the platform administrator), with
//     a personal-login token (the token a claim redemption returns, or the JWT of `studio login`), or
//     with the e-mail and password of a personal account.
//   - A session lasts SessionTTL (12 hours) from sign-in, fixed: it is not extended by use. An expired
//     session is refused and the person signs in again.
//   - A session opened with a key stores the key's SHA-256 and resolves it again on every request, with
//     the same rules and cache as the API (ResolveIdentity): a tenant rekey, a member rekey or disable,
//     or a rotated administrator key ends the session at once. A personal session ends when its account
//     is disabled.
//   - Every session has its own CSRF token (the synchronizer token of its forms).

// ConsoleSession is a valid browser session: the identity it acts as and the token its forms carry.
type ConsoleSession struct {
	Identity Identity
	CSRF     string
	// Label names who is signed in, for the page header: the tenant's name, the member's or the personal
	// account's e-mail, or "Platform administrator".
	Label string
}

// errNoSession is the one answer for a missing, unknown, expired or revoked session.
var errNoSession = Unauthenticated("you are not signed in, or your session has ended: sign in again")

// consoleSignInPerAddress bounds key and token sign-ins per client address and hour.
const consoleSignInPerAddress = 200

// StartKeySession opens a session for an API key (tenant, member account or administrator) or a
// personal-login token, and returns the cookie value. The credential is resolved exactly as the API
// resolves it; a wrong one is KindUnauthenticated. Attempts are limited per client address.
func (au *AuthService) StartKeySession(ctx context.Context, credential, clientAddr string) (string, error) {
	a := au.a
	credential = strings.TrimSpace(credential)
	if credential == "" {
		return "", Invalid("paste an API key (sk-studio-...) or a login token")
	}
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		return a.limitSubject(tx, "console-signin/address", "addr:"+clientAddr, consoleSignInPerAddress)
	})
	if err != nil {
		return "", err
	}
	id, err := a.Auth().ResolveIdentity(ctx, credential)
	if err != nil {
		return "", err
	}
	if id.Kind == IdentityUser {
		return a.Auth().StartUserSession(ctx, id.UserID)
	}
	s := Session{Kind: string(id.Kind), KeyHash: HashKey(credential)}
	if id.TenantID != "" {
		s.TenantID = &id.TenantID
	}
	if id.AccountID != "" {
		s.AccountID = &id.AccountID
	}
	return a.openSession(ctx, s)
}

// StartPasswordSession checks the e-mail and password of a personal account (attempts are limited as for
// POST /api/auth/login) and opens a session for it.
func (au *AuthService) StartPasswordSession(ctx context.Context, email, password, clientAddr string) (string, error) {
	a := au.a
	u, err := a.Auth().Authenticate(ctx, email, password, clientAddr)
	if err != nil {
		return "", err
	}
	return a.Auth().StartUserSession(ctx, u.ID)
}

// openSession stores s with a fresh cookie value, CSRF token and expiry, and prunes sessions that
// expired more than a day ago.
func (a *App) openSession(ctx context.Context, s Session) (string, error) {
	value := RandomString(43, keyAlphabet)
	now := a.Now()
	s.ID, s.CSRF, s.ExpiresAt, s.CreatedAt = HashKey(value), RandomString(32, keyAlphabet), now.Add(SessionTTL), now
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("expires_at < ?", now.Add(-24*time.Hour)).Delete(&Session{}).Error; err != nil {
			return Internal("session: prune", err)
		}
		if err := tx.Create(&s).Error; err != nil {
			return Internal("session: create", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return value, nil
}

// ResolveSession returns the session of a cookie value with the identity it acts as now. A missing,
// unknown or expired session, or one whose key or account no longer works, is KindUnauthenticated.
func (au *AuthService) ResolveSession(ctx context.Context, cookie string) (*ConsoleSession, error) {
	a := au.a
	if cookie == "" {
		return nil, errNoSession
	}
	var s Session
	err := a.DB.WithContext(ctx).First(&s, "id = ?", HashKey(cookie)).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, Internal("session: look up", err)
	}
	if !a.Now().Before(s.ExpiresAt) {
		return nil, errNoSession
	}
	out := &ConsoleSession{CSRF: s.CSRF}
	if s.Kind == string(IdentityUser) {
		u, err := a.Auth().SessionUser(ctx, cookie)
		if err != nil {
			return nil, errNoSession
		}
		out.Identity, out.Label = Identity{Kind: IdentityUser, UserID: u.ID}, u.Email
		return out, nil
	}
	id, err := a.identityFromKeyHash(ctx, s.KeyHash)
	if err != nil || string(id.Kind) != s.Kind || id.TenantID != deref(s.TenantID) || id.AccountID != deref(s.AccountID) {
		return nil, errNoSession
	}
	out.Identity = *id
	if out.Label, err = a.identityLabel(ctx, id); err != nil {
		return nil, err
	}
	return out, nil
}

// identityFromKeyHash resolves the hash of an API key as ResolveIdentity resolves the key itself, with
// the same identity cache.
func (a *App) identityFromKeyHash(ctx context.Context, hash string) (*Identity, error) {
	if len(hash) != 64 {
		return nil, errBadCredential
	}
	cache := a.identities()
	if e, ok := cache.get(hash); ok {
		id := e.id
		return &id, nil
	}
	epoch := cache.epochNow()
	id, err := a.identityFromKey(ctx, hash)
	if err != nil {
		return nil, err
	}
	if id.Kind != IdentityAdmin {
		cache.put(epoch, hash, cachedIdentity{id: *id})
	}
	return id, nil
}

// identityLabel names a key identity for the page header.
func (a *App) identityLabel(ctx context.Context, id *Identity) (string, error) {
	switch id.Kind {
	case IdentityTenant:
		t, err := a.tenantByID(ctx, id.TenantID)
		if err != nil {
			return "", err
		}
		return t.Name, nil
	case IdentityAccount:
		var acc Account
		if err := a.DB.WithContext(ctx).Select("email").First(&acc, "id = ?", id.AccountID).Error; err != nil {
			return "", Internal("session: member", err)
		}
		return acc.Email, nil
	}
	return "Platform administrator", nil
}
