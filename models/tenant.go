package models

import (
	"context"
	"errors"
	"strings"

	"gorm.io/gorm"
)

// TenantInput is what an administrator gives to create a tenant.
type TenantInput struct {
	Name         string   `json:"name"`
	Credits      *int64   `json:"credits"`
	Unmetered    bool     `json:"unmetered"`
	QuotaMonthly *int64   `json:"quota_monthly"`
	Markup       *float64 `json:"markup"`
}

// CreateTenant creates a tenant with its key and opening credits in one transaction; it returns the plaintext key once.
func (acs *AccountService) CreateTenant(ctx context.Context, in TenantInput) (*Tenant, string, error) {
	a := acs.a
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || len([]rune(in.Name)) > 200 {
		return nil, "", Invalid("name is required (at most 200 characters)")
	}
	if in.Credits != nil && *in.Credits < 0 {
		return nil, "", Invalid("credits must not be negative")
	}
	if in.QuotaMonthly != nil && *in.QuotaMonthly < 0 {
		return nil, "", Invalid("quota_monthly must not be negative")
	}
	markup := 1.0
	if in.Markup != nil {
		if *in.Markup <= 0 || *in.Markup > 100 {
			return nil, "", Invalid("markup must be a positive factor such as 1.2")
		}
		markup = *in.Markup
	}
	t := &Tenant{ID: NewID(), Name: in.Name, Unmetered: in.Unmetered, QuotaMonthly: in.QuotaMonthly, Markup: markup,
		CallbackSecret: "whsec_" + RandomString(32, keyAlphabet)}
	key := NewAPIKey()
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(t).Error; err != nil {
			return err
		}
		if err := tx.Create(&APIKey{ID: NewID(), Hash: HashKey(key), Kind: "tenant", TenantID: t.ID}).Error; err != nil {
			return err
		}
		if in.Credits != nil && *in.Credits > 0 {
			return a.creditTenant(tx, t, *in.Credits, "admin_credit", "", "opening credits")
		}
		return nil
	})
	if err != nil {
		return nil, "", asCoreError("tenant: create", err)
	}
	return t, key, nil
}

// tenantByID returns a tenant by id.
func (a *App) tenantByID(ctx context.Context, id string) (*Tenant, error) {
	return findTenant(a.DB.WithContext(ctx), id)
}

// TenantSettings returns the caller's own tenant (its name and the secret that signs its callbacks).
func (acs *AccountService) TenantSettings(ctx context.Context, id *Identity) (*Tenant, error) {
	a := acs.a
	if err := id.Require(CapTenantSettings); err != nil {
		return nil, err
	}
	return a.tenantByID(ctx, id.TenantID)
}

// TenantByID returns any tenant, for the platform administrator.
func (acs *AccountService) TenantByID(ctx context.Context, id *Identity, tenantID string) (*Tenant, error) {
	a := acs.a
	if err := id.Require(CapAdminister); err != nil {
		return nil, err
	}
	return a.tenantByID(ctx, tenantID)
}

func findTenant(tx *gorm.DB, id string) (*Tenant, error) {
	var t Tenant
	err := tx.First(&t, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound("tenant")
	}
	if err != nil {
		return nil, Internal("tenant: read", err)
	}
	return &t, nil
}

// RekeyTenant replaces the tenant's key; the old key fails at once.
func (acs *AccountService) RekeyTenant(ctx context.Context, tenantID string) (string, error) {
	a := acs.a
	key := NewAPIKey()
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		if _, err := findTenant(tx, tenantID); err != nil {
			return err
		}
		if err := tx.Where("tenant_id = ? AND kind = ?", tenantID, "tenant").Delete(&APIKey{}).Error; err != nil {
			return err
		}
		return tx.Create(&APIKey{ID: NewID(), Hash: HashKey(key), Kind: "tenant", TenantID: tenantID}).Error
	})
	if err != nil {
		return "", asCoreError("tenant: rekey", err)
	}
	a.identityChanged(ctx, IdentityTenant, tenantID)
	return key, nil
}

// BindTenant restricts a tenant's routing to a model family or a channel; "" unbinds.
func (acs *AccountService) BindTenant(ctx context.Context, tenantID, model string) error {
	a := acs.a
	res := a.DB.WithContext(ctx).Model(&Tenant{}).Where("id = ?", tenantID).Update("binding", strings.TrimSpace(model))
	if res.Error != nil {
		return Internal("tenant: bind", res.Error)
	}
	if res.RowsAffected == 0 {
		return NotFound("tenant")
	}
	// The binding travels with cached identities: evict them on every replica.
	a.identityChanged(ctx, IdentityTenant, tenantID)
	return nil
}

// Tenants lists every tenant, newest first.
func (acs *AccountService) Tenants(ctx context.Context, id *Identity) ([]Tenant, error) {
	a := acs.a
	if err := id.Require(CapAdminister); err != nil {
		return nil, err
	}
	var ts []Tenant
	if err := a.DB.WithContext(ctx).Order("created_at DESC").Find(&ts).Error; err != nil {
		return nil, Internal("tenant: list", err)
	}
	return ts, nil
}

// asCoreError passes core errors through and wraps anything else as internal.
func asCoreError(op string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(op, err)
}

// NormalizeEmail trims and lower-cases an e-mail address.
func NormalizeEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
