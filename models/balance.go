package models

import (
	"context"
	"time"
)

// BalanceView is the answer of GET /api/balance.
type BalanceView struct {
	Credits   int64     `json:"credits"`
	Identity  string    `json:"identity"`
	CheckedAt time.Time `json:"checked_at"`
}

// Balance returns what the identity can spend: the tenant's whole pool for a tenant key, the member's
// dedicated credits or the shared pool's spendable part for a member, the person's credits for a login.
func (crs *CreditService) Balance(ctx context.Context, id *Identity) (*BalanceView, error) {
	a := crs.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	v := &BalanceView{Identity: "account", CheckedAt: a.Now().Truncate(time.Second)}
	switch id.Kind {
	case IdentityTenant:
		t, err := a.tenantByID(ctx, id.TenantID)
		if err != nil {
			return nil, err
		}
		v.Identity, v.Credits = "tenant", t.Balance()
	case IdentityAccount:
		var acc Account
		if err := a.DB.WithContext(ctx).First(&acc, "id = ?", id.AccountID).Error; err != nil {
			return nil, Internal("balance: account", err)
		}
		v.Credits = acc.Credits
		if acc.Shared {
			t, err := a.tenantByID(ctx, acc.TenantID)
			if err != nil {
				return nil, err
			}
			v.Credits = t.Spendable
		}
	case IdentityUser:
		var u User
		if err := a.DB.WithContext(ctx).First(&u, "id = ?", id.UserID).Error; err != nil {
			return nil, Internal("balance: user", err)
		}
		v.Credits = u.Credits
	default:
		return nil, Forbidden("the administrator key has no credits")
	}
	return v, nil
}

// PoolView is the answer of GET /api/tenant-pool.
type PoolView struct {
	TenantID  string `json:"tenant_id"`
	Name      string `json:"name"`
	Balance   int64  `json:"balance"`
	Spendable int64  `json:"spendable"`
	Reserved  int64  `json:"reserved"`
	Unmetered bool   `json:"unmetered"`
}

// reportedTenant returns the caller's tenant for its reports (pool, statistics, usage): a tenant key only.
func (a *App) reportedTenant(ctx context.Context, id *Identity) (*Tenant, error) {
	if err := id.Require(CapTenantReports); err != nil {
		return nil, err
	}
	return a.tenantByID(ctx, id.TenantID)
}

// Pool returns the tenant's pool figures.
func (crs *CreditService) Pool(ctx context.Context, id *Identity) (*PoolView, error) {
	a := crs.a
	t, err := a.reportedTenant(ctx, id)
	if err != nil {
		return nil, err
	}
	return &PoolView{TenantID: t.ID, Name: t.Name, Balance: t.Balance(), Spendable: t.Spendable, Reserved: t.Reserved, Unmetered: t.Unmetered}, nil
}
