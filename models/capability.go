package models

// Capability names something an identity may do, after the permission table of spec section 5. This file
// is the one place that says who may do what: every core operation that acts for a caller starts with
// id.Require(capability) (the surfaces only authenticate), and the console uses May to choose its pages
// and links. rest/permissions_test.go walks every REST route, GraphQL field and console page with each
// identity kind and compares the answers with this table.
type Capability string

// The capabilities and who holds them.
const (
	// CapGenerate: submit generation jobs (image, video, copy, chat, image reading) and read one's jobs
	// (tenant: all its jobs; member and personal login: their own), read one's balance, upload files.
	CapGenerate Capability = "generate"
	// CapReadTemplates: list the templates and skills the identity may see.
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
	// CapClaimCodes: create claim codes (tenant key only).
	CapClaimCodes Capability = "claim-codes"
	// CapReadClaimCodes: list claim codes: a tenant its own, the administrator every tenant's.
	CapReadClaimCodes Capability = "read-claim-codes"
	// CapTenantSettings: read the tenant's callback secret (tenant key only).
	CapTenantSettings Capability = "tenant-settings"
	// CapClaims: the templates and codes a personal login holds through claims.
	CapClaims Capability = "claims"
	// CapAdminister: platform administration (administrator key only).
	CapAdminister Capability = "administer"
)

// permission is one row of the table: who holds a capability, and how a refusal names what was refused.
type permission struct {
	holders []IdentityKind
	what    string // completes "… cannot <what>"
}

// permissions is the permission table (spec section 5).
var permissions = map[Capability]permission{
	CapGenerate:        {[]IdentityKind{IdentityTenant, IdentityAccount, IdentityUser}, "generate, upload or read jobs and balances"},
	CapReadTemplates:   {[]IdentityKind{IdentityTenant, IdentityAccount, IdentityUser, IdentityAdmin}, "list templates or skills"},
	CapWriteTemplates:  {[]IdentityKind{IdentityTenant, IdentityUser, IdentityAdmin}, "create or change templates"},
	CapImageToTemplate: {[]IdentityKind{IdentityTenant, IdentityUser}, "turn images into templates"},
	CapListModels:      {[]IdentityKind{IdentityTenant, IdentityAccount, IdentityUser, IdentityAdmin}, "list models"},
	CapOwnAccount:      {[]IdentityKind{IdentityUser}, "use personal account settings (whoami, password)"},
	CapTenantReports:   {[]IdentityKind{IdentityTenant}, "read the tenant's pool, statistics or usage"},
	CapManageMembers:   {[]IdentityKind{IdentityTenant}, "manage member accounts"},
	CapHooks:           {[]IdentityKind{IdentityTenant}, "manage pipeline hooks"},
	CapClaimCodes:      {[]IdentityKind{IdentityTenant}, "create claim codes"},
	CapReadClaimCodes:  {[]IdentityKind{IdentityTenant, IdentityAdmin}, "list claim codes"},
	CapTenantSettings:  {[]IdentityKind{IdentityTenant}, "read the tenant's settings"},
	CapClaims:          {[]IdentityKind{IdentityUser}, "list claimed templates and codes"},
	CapAdminister:      {[]IdentityKind{IdentityAdmin}, "administer the platform"},
}

// May reports whether the identity holds the capability.
func (id *Identity) May(c Capability) bool { return id != nil && id.is(permissions[c].holders...) }

// Require returns nil when the identity holds the capability, else KindForbidden (403) saying what was
// refused and which credential to use instead.
func (id *Identity) Require(c Capability) error {
	if id.May(c) {
		return nil
	}
	what := permissions[c].what
	if what == "" {
		what = "do this"
	}
	var instead string
	switch {
	case len(permissions[c].holders) == 1 && permissions[c].holders[0] == IdentityTenant:
		instead = "; use the tenant key"
	case len(permissions[c].holders) == 1 && permissions[c].holders[0] == IdentityUser:
		instead = "; sign in with a personal login"
	case len(permissions[c].holders) == 1 && permissions[c].holders[0] == IdentityAdmin:
		instead = "; use the administrator key"
	case id != nil && id.Kind == IdentityAccount:
		instead = "; use the tenant key"
	case id != nil && id.Kind == IdentityAdmin:
		instead = "; use a tenant key or a personal login"
	}
	kind := IdentityKind("")
	if id != nil {
		kind = id.Kind
	}
	switch kind {
	case IdentityTenant:
		return Forbidden("a tenant key cannot " + what + instead)
	case IdentityAccount:
		return Forbidden("a member account key cannot " + what + instead)
	case IdentityAdmin:
		return Forbidden("the administrator key cannot " + what + instead)
	case IdentityUser:
		return Forbidden("a personal login cannot " + what + instead)
	}
	return Forbidden("this credential cannot " + what + instead)
}
