package modelstest

import "studio/models"

// Tenant is the identity of a tenant key of the tenant.
func Tenant(tenantID string) *models.Identity {
	return &models.Identity{Kind: models.IdentityTenant, TenantID: tenantID}
}

// User is the identity of a personal login of the user.
func User(userID string) *models.Identity {
	return &models.Identity{Kind: models.IdentityUser, UserID: userID}
}
