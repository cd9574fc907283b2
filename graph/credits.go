package graph

import (
	"context"

	"studio/models"
)

// Balance answers what the caller can spend (GET /api/balance).
func (r *queryResolver) Balance(ctx context.Context) (*models.BalanceView, error) {
	id, err := r.caller(ctx, "balance", generators...)
	if err != nil {
		return nil, err
	}
	return r.app.Balance(ctx, id)
}

// TenantPool answers the tenant's pool (GET /api/tenant-pool).
func (r *queryResolver) TenantPool(ctx context.Context) (*models.PoolView, error) {
	id, err := r.caller(ctx, "tenantPool", tenantOnly...)
	if err != nil {
		return nil, err
	}
	return r.app.Pool(ctx, id.TenantID)
}

// TenantStats answers the tenant's statistics (GET /api/tenant-stats); the core normalises hours.
func (r *queryResolver) TenantStats(ctx context.Context, hours *int) (*models.StatsView, error) {
	id, err := r.caller(ctx, "tenantStats", tenantOnly...)
	if err != nil {
		return nil, err
	}
	return r.app.TenantStats(ctx, id.TenantID, derefInt(hours))
}

// TenantUsage answers the tenant's usage per day (GET /api/tenant-usage); the core normalises days.
func (r *queryResolver) TenantUsage(ctx context.Context, days *int) (*models.UsageView, error) {
	id, err := r.caller(ctx, "tenantUsage", tenantOnly...)
	if err != nil {
		return nil, err
	}
	return r.app.TenantUsage(ctx, id.TenantID, derefInt(days))
}

// Accounts lists the tenant's member accounts (GET /api/tenant-accounts).
func (r *queryResolver) Accounts(ctx context.Context) ([]models.AccountView, error) {
	id, err := r.caller(ctx, "accounts", tenantOnly...)
	if err != nil {
		return nil, err
	}
	return r.app.Accounts(ctx, id.TenantID)
}

// CreateAccount creates a member account (POST /api/tenant-accounts create).
func (r *mutationResolver) CreateAccount(ctx context.Context, input models.AccountInput) (*models.AccountView, error) {
	id, err := r.caller(ctx, "createAccount", tenantOnly...)
	if err != nil {
		return nil, err
	}
	return r.app.CreateAccount(ctx, id.TenantID, input)
}

// SetAccountQuota sets a member's quota absolutely (set-quota).
func (r *mutationResolver) SetAccountQuota(ctx context.Context, accountID string, shared *bool, credits *int) (*models.AccountView, error) {
	id, err := r.caller(ctx, "setAccountQuota", tenantOnly...)
	if err != nil {
		return nil, err
	}
	in := models.QuotaInput{Shared: shared}
	if credits != nil {
		c := int64(*credits)
		in.Credits = &c
	}
	return r.app.SetAccountQuota(ctx, id.TenantID, accountID, in)
}

// RekeyAccount replaces a member's key (rekey).
func (r *mutationResolver) RekeyAccount(ctx context.Context, accountID string) (*AccountKey, error) {
	id, err := r.caller(ctx, "rekeyAccount", tenantOnly...)
	if err != nil {
		return nil, err
	}
	key, err := r.app.RekeyAccount(ctx, id.TenantID, accountID)
	if err != nil {
		return nil, err
	}
	return &AccountKey{AccountID: accountID, APIKey: key}, nil
}

// ToggleAccount disables or enables a member account (toggle).
func (r *mutationResolver) ToggleAccount(ctx context.Context, accountID string, disabled bool) (*AccountState, error) {
	id, err := r.caller(ctx, "toggleAccount", tenantOnly...)
	if err != nil {
		return nil, err
	}
	if err := r.app.ToggleAccount(ctx, id.TenantID, accountID, disabled); err != nil {
		return nil, err
	}
	return &AccountState{AccountID: accountID, Disabled: disabled}, nil
}

// derefInt returns the integer or 0 for nil (the core's "use the default").
func derefInt(n *int) int {
	if n == nil {
		return 0
	}
	return *n
}
