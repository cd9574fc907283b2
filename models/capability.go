package models

// Capability names something an identity may do, after the permission table of spec section 5. The
// browser console checks pages against it; the REST routes declare the same kinds per endpoint.
type Capability string

// The capabilities and who holds them.
const (
	// CapGenerate: submit generation jobs and read one's jobs (tenant: all its jobs; member and personal
	// login: their own), read one's balance, upload files.
	CapGenerate Capability = "generate"
	// CapReadTemplates: list the templates the identity may see.
	CapReadTemplates Capability = "read-templates"
	// CapWriteTemplates: create and change templates (tenant key, personal login, administrator for
	// platform templates); member account keys get 403.
	CapWriteTemplates Capability = "write-templates"
	// CapImageToTemplate: turn an image into a template (tenant key, personal login); member keys get 403
	// and the administrator has no tenant to keep the template in.
	CapImageToTemplate Capability = "image-to-template"
	// CapListModels: list what `model` may name (every identity).
	CapListModels Capability = "list-models"
	// CapOwnAccount: one's own personal account: whoami, password change (personal login only).
	CapOwnAccount Capability = "own-account"
	// CapTenantReports: tenant pool, statistics and usage (tenant key only).
	CapTenantReports Capability = "tenant-reports"
	// CapManageMembers: create member accounts, set quotas, rekey, enable and disable (tenant key only).
	CapManageMembers Capability = "manage-members"
	// CapHooks: pipeline hooks (tenant key only).
	CapHooks Capability = "hooks"
	// CapClaimCodes: create claim codes and list the tenant's codes (tenant key only).
	CapClaimCodes Capability = "claim-codes"
	// CapTenantSettings: read the tenant's callback secret (tenant key only).
	CapTenantSettings Capability = "tenant-settings"
	// CapClaims: the templates and codes a personal login holds through claims.
	CapClaims Capability = "claims"
	// CapAdminister: platform administration (administrator key only).
	CapAdminister Capability = "administer"
)

// capabilityHolders lists, per capability, the identity kinds that hold it.
var capabilityHolders = map[Capability][]IdentityKind{
	CapGenerate:        {IdentityTenant, IdentityAccount, IdentityUser},
	CapReadTemplates:   {IdentityTenant, IdentityAccount, IdentityUser, IdentityAdmin},
	CapWriteTemplates:  {IdentityTenant, IdentityUser, IdentityAdmin},
	CapImageToTemplate: {IdentityTenant, IdentityUser},
	CapListModels:      {IdentityTenant, IdentityAccount, IdentityUser, IdentityAdmin},
	CapOwnAccount:      {IdentityUser},
	CapTenantReports:   {IdentityTenant},
	CapManageMembers:   {IdentityTenant},
	CapHooks:           {IdentityTenant},
	CapClaimCodes:      {IdentityTenant},
	CapTenantSettings:  {IdentityTenant},
	CapClaims:          {IdentityUser},
	CapAdminister:      {IdentityAdmin},
}

// May reports whether the identity holds the capability.
func (id *Identity) May(c Capability) bool { return id.Is(capabilityHolders[c]...) }

// Require returns nil when the identity holds the capability, else KindForbidden naming why.
func (id *Identity) Require(c Capability) error {
	if id.May(c) {
		return nil
	}
	switch id.Kind {
	case IdentityAccount:
		return Forbidden("a member account cannot do this; sign in with the tenant key")
	case IdentityAdmin:
		return Forbidden("the platform administrator cannot do this here; use the administrator console")
	case IdentityUser:
		return Forbidden("a personal account cannot do this")
	}
	return Forbidden("this identity cannot do this")
}
