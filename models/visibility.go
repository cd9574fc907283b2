package models

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"
)

// This file holds the one visibility rule of templates (image, copy and video). Every listing, the skill
// list, hook validation and every generation path decide what a caller may see and use through
// viewer.access; the SQL scopes below only narrow the rows that access then judges.
//
// The rule (spec 2.3, 2.7, 4.8, 5):
//
//   - "mine": for a tenant key or an account key, the templates of the caller's tenant; for a personal
//     login, its own personal templates. The administrator has no "mine": it manages the platform
//     templates, which it sees with source "platform", inactive ones included.
//   - "platform": platform templates (no tenant and no personal owner) that are active.
//   - Inactive templates are listed to their owner (and platform ones to the administrator) with
//     active false, and are neither usable nor listed to anyone else.
//   - skill_spec_md is shown only to the administrator and to the template's author (the tenant key that
//     created a tenant template, the personal login that created a personal template). Member accounts
//     of the tenant do not see it.
//   - prompt_template and the images (sample_images, default_reference_images, a video template's cover
//     and sample video) are shown to everyone who sees the template, except on a gated template: there
//     only the administrator, the author, the owning tenant (its key and its member accounts), the tenant
//     recorded on a claim code that bundles the template, and personal logins holding a grant for it
//     (TemplateGrant) see them. Everyone else sees the template with locked true and cannot use it.

// templateOwnership is what the visibility rule reads of a template of either collection.
type templateOwnership struct {
	ID         string
	TenantID   *string
	UserID     *string
	AuthorKind string
	AuthorID   string
	Active     bool
	Gated      bool
}

// platform reports whether the template belongs to the platform (no tenant and no personal owner).
func (o templateOwnership) platform() bool { return o.TenantID == nil && o.UserID == nil }

// Source values of template listings.
const (
	SourceMine     = "mine"
	SourcePlatform = "platform"
	SourceAll      = "all"
)

// access is what one caller may do with one template.
type access struct {
	// visible: the template is listed to the caller (and usable when active and not locked).
	visible bool
	// source is SourceMine or SourcePlatform, the row's source in listings.
	source string
	// manage: the caller may change it (PATCH) and sees it while inactive.
	manage bool
	// locked: gated and the caller is not entitled; no prompt text or images, not usable.
	locked bool
	// spec: the caller may read skill_spec_md.
	spec bool
}

// usable reports whether the caller may generate from the template.
func (ac access) usable(active bool) bool { return ac.visible && active && !ac.locked }

// viewer evaluates the visibility rule for one caller, loading the caller's claim entitlements once.
type viewer struct {
	db *gorm.DB
	id *Identity
	// claimed holds the template ids the caller holds through claims: TemplateGrant rows of a personal
	// login, or the template ids of claim codes recorded on the caller's tenant. Loaded on first need.
	claimed map[string]bool
}

// newViewer returns the visibility rule bound to a caller and a database handle (a transaction or not).
func newViewer(db *gorm.DB, id *Identity) *viewer { return &viewer{db: db, id: id} }

// access decides what the caller may see and do with the template: the one visibility function.
func (v *viewer) access(o templateOwnership) (access, error) {
	id := v.id
	var ac access
	mine := false
	switch id.Kind {
	case IdentityAdmin:
		ac.manage = o.platform()
	case IdentityTenant:
		mine = o.TenantID != nil && *o.TenantID == id.TenantID
		ac.manage = mine
	case IdentityAccount:
		mine = o.TenantID != nil && *o.TenantID == id.TenantID
	case IdentityUser:
		mine = o.UserID != nil && *o.UserID == id.UserID
		ac.manage = mine
	}
	ac.visible = mine || ac.manage || (o.platform() && o.Active)
	if !ac.visible {
		return access{}, nil
	}
	ac.source = SourcePlatform
	if mine {
		ac.source = SourceMine
	}
	admin := id.Kind == IdentityAdmin
	author := v.isAuthor(o)
	ac.spec = admin || author
	if o.Gated && !admin && !author && !mine {
		claimed, err := v.holdsClaim(o.ID)
		if err != nil {
			return access{}, err
		}
		ac.locked = !claimed
	}
	return ac, nil
}

// isAuthor reports whether the caller created the template.
func (v *viewer) isAuthor(o templateOwnership) bool {
	id := v.id
	if o.AuthorKind != string(id.Kind) {
		return false
	}
	switch id.Kind {
	case IdentityAdmin:
		return true
	case IdentityTenant:
		return o.AuthorID == id.TenantID
	case IdentityAccount:
		return o.AuthorID == id.AccountID
	case IdentityUser:
		return o.AuthorID == id.UserID
	}
	return false
}

// holdsClaim reports whether the caller holds a claim for the template.
func (v *viewer) holdsClaim(templateID string) (bool, error) {
	if v.claimed == nil {
		v.claimed = map[string]bool{}
		switch v.id.Kind {
		case IdentityUser:
			var ids []string
			if err := v.db.Model(&TemplateGrant{}).Where("user_id = ?", v.id.UserID).Pluck("template_id", &ids).Error; err != nil {
				return false, fmt.Errorf("visibility: load grants: %w", err)
			}
			for _, id := range ids {
				v.claimed[id] = true
			}
		case IdentityTenant, IdentityAccount:
			var lists []sql.NullString
			if err := v.db.Model(&ClaimCode{}).Where("tenant_id = ?", v.id.TenantID).Pluck("template_ids", &lists).Error; err != nil {
				return false, fmt.Errorf("visibility: load claim codes: %w", err)
			}
			for _, raw := range lists {
				var ids []string
				if json.Unmarshal([]byte(raw.String), &ids) == nil {
					for _, id := range ids {
						v.claimed[id] = true
					}
				}
			}
		}
	}
	return v.claimed[templateID], nil
}

// candidates narrows a query of templates or video templates to the rows the caller could see; access
// decides on each row. It must never exclude a row that access would show.
func (v *viewer) candidates(q *gorm.DB) *gorm.DB {
	const platform = "tenant_id IS NULL AND user_id IS NULL"
	switch v.id.Kind {
	case IdentityAdmin:
		return q.Where(platform)
	case IdentityTenant, IdentityAccount:
		return q.Where("tenant_id = ? OR ("+platform+" AND active = ?)", v.id.TenantID, true)
	case IdentityUser:
		return q.Where("user_id = ? OR ("+platform+" AND active = ?)", v.id.UserID, true)
	}
	return q.Where("1 = 0")
}
