package graph

import (
	"context"

	"studio/models"
)

// Balance answers what the caller can spend (GET /api/balance).
func (r *queryResolver) Balance(ctx context.Context) (*models.BalanceView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Credits().Balance(ctx, id)
}

// TenantPool answers the tenant's pool (GET /api/tenant-pool).
func (r *queryResolver) TenantPool(ctx context.Context) (*models.PoolView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Credits().Pool(ctx, id)
}

// TenantStats answers the tenant's statistics (GET /api/tenant-stats); the core normalises hours.
func (r *queryResolver) TenantStats(ctx context.Context, hours *int) (*models.StatsView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Accounts().TenantStats(ctx, id, derefInt(hours))
}

// TenantUsage answers the tenant's usage per day (GET /api/tenant-usage); the core normalises days.
func (r *queryResolver) TenantUsage(ctx context.Context, days *int) (*models.UsageView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Accounts().TenantUsage(ctx, id, derefInt(days))
}

// Accounts lists the tenant's member accounts (GET /api/tenant-accounts).
func (r *queryResolver) Accounts(ctx context.Context) ([]models.AccountView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Accounts().Accounts(ctx, id)
}

// CreateAccount creates a member account (POST /api/tenant-accounts create).
func (r *mutationResolver) CreateAccount(ctx context.Context, input models.AccountInput) (*models.AccountView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Accounts().CreateAccount(ctx, id, input)
}

// SetAccountQuota sets a member's quota absolutely (set-quota).
func (r *mutationResolver) SetAccountQuota(ctx context.Context, accountID string, shared *bool, credits *int) (*models.AccountView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	in := models.QuotaInput{Shared: shared}
	if credits != nil {
		c := int64(*credits)
		in.Credits = &c
	}
	return r.svc.Accounts().SetAccountQuota(ctx, id, accountID, in)
}

// RekeyAccount replaces a member's key (rekey).
func (r *mutationResolver) RekeyAccount(ctx context.Context, accountID string) (*AccountKey, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	key, err := r.svc.Accounts().RekeyAccount(ctx, id, accountID)
	if err != nil {
		return nil, err
	}
	return &AccountKey{AccountID: accountID, APIKey: key}, nil
}

// ToggleAccount disables or enables a member account (toggle).
func (r *mutationResolver) ToggleAccount(ctx context.Context, accountID string, disabled bool) (*AccountState, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.svc.Accounts().ToggleAccount(ctx, id, accountID, disabled); err != nil {
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
