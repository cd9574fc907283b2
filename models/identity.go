package models

import (
	"context"
	"errors"
	"strings"

	"gorm.io/gorm"
)

// IdentityKind names who is calling.
type IdentityKind string

// The identities of spec section 5, plus the platform administrator.
const (
	IdentityTenant  IdentityKind = "tenant"
	IdentityAccount IdentityKind = "account"
	IdentityUser    IdentityKind = "user"
	IdentityAdmin   IdentityKind = "admin"
)

// Identity is the resolved caller that every handler receives.
type Identity struct {
	Kind      IdentityKind
	TenantID  string // tenant and account identities
	AccountID string // account identity
	UserID    string // personal login
	Agent     string // X-CS-Agent of an assistant sharing a tenant key
}

// Owner returns a stable key naming the identity, for rate limits and ownership.
func (id *Identity) Owner() string {
	switch id.Kind {
	case IdentityAccount:
		return "account:" + id.AccountID
	case IdentityUser:
		return "user:" + id.UserID
	case IdentityTenant:
		return "tenant:" + id.TenantID
	}
	return "admin"
}

// Is reports whether the identity is one of kinds.
func (id *Identity) Is(kinds ...IdentityKind) bool {
	for _, k := range kinds {
		if id.Kind == k {
			return true
		}
	}
	return false
}

var errBadCredential = Unauthenticated("invalid API key")

// ResolveIdentity turns a credential (API key or personal-login JWT) into an Identity.
// A missing or unknown credential is KindUnauthenticated.
func (a *App) ResolveIdentity(ctx context.Context, credential string) (*Identity, error) {
	credential = strings.TrimSpace(credential)
	if credential == "" {
		return nil, Unauthenticated("missing credentials: send X-API-Key or Authorization: Bearer")
	}
	if !strings.HasPrefix(credential, KeyPrefix) {
		return a.identityFromToken(credential)
	}
	if !ValidKeyFormat(credential) {
		return nil, errBadCredential
	}
	hash := HashKey(credential)
	if a.isAdminHash(ctx, hash) {
		return &Identity{Kind: IdentityAdmin}, nil
	}
	var key APIKey
	err := a.DB.WithContext(ctx).Where("hash = ?", hash).First(&key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errBadCredential
	}
	if err != nil {
		return nil, Internal("identity: look up key", err)
	}
	// The lookup is by hash; compare again in constant time so that timing never depends on the key.
	if !EqualHash(key.Hash, hash) {
		return nil, errBadCredential
	}
	switch key.Kind {
	case "tenant":
		return &Identity{Kind: IdentityTenant, TenantID: key.TenantID}, nil
	case "account":
		var acc Account
		if err := a.DB.WithContext(ctx).First(&acc, "id = ?", *key.AccountID).Error; err != nil {
			return nil, errBadCredential
		}
		if acc.Disabled {
			return nil, Unauthenticated("this member account is disabled; ask the tenant administrator to enable it")
		}
		return &Identity{Kind: IdentityAccount, TenantID: acc.TenantID, AccountID: acc.ID}, nil
	}
	return nil, errBadCredential
}

func (a *App) isAdminHash(ctx context.Context, hash string) bool {
	if a.Config.AdminKey != "" {
		return EqualHash(HashKey(a.Config.AdminKey), hash)
	}
	stored, err := a.setting(ctx, "admin_key_hash")
	return err == nil && stored != "" && EqualHash(stored, hash)
}
