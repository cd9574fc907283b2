package graph

import (
	"context"

	"studio/models"
)

// CreateClaim creates a claim code (POST /api/tenant-claims).
func (r *mutationResolver) CreateClaim(ctx context.Context, input models.ClaimInput) (*models.ClaimCreated, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Claims().CreateClaimCode(ctx, id, input)
}
