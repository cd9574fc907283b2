package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Hook types of a pipeline hook (spec 2.8).
const (
	HookArticle = "article"
	HookVideo   = "video"
)

// maxHookNote bounds a hook's note.
const maxHookNote = 500

// HookInput is the body of POST /api/template-hooks. Posting the same image template slug and hook type
// again replaces that hook's target, enabled flag (default true) and note (default empty).
type HookInput struct {
	ImageTemplateSlug string `json:"image_template_slug"`
	HookType          string `json:"hook_type"`
	HookTemplateSlug  string `json:"hook_template_slug"`
	Enabled           *bool  `json:"enabled"`
	Note              string `json:"note"`
}

// HookPatch is the body of PATCH /api/template-hooks: the id and the fields to change.
type HookPatch struct {
	ID                string  `json:"id"`
	ImageTemplateSlug *string `json:"image_template_slug"`
	HookType          *string `json:"hook_type"`
	HookTemplateSlug  *string `json:"hook_template_slug"`
	Enabled           *bool   `json:"enabled"`
	Note              *string `json:"note"`
}

// HookView is a pipeline hook as listed and returned (spec 2.8).
type HookView struct {
	ID                string    `json:"id"`
	ImageTemplateSlug string    `json:"image_template_slug"`
	HookType          string    `json:"hook_type"`
	HookTemplateSlug  string    `json:"hook_template_slug"`
	Enabled           bool      `json:"enabled"`
	Note              string    `json:"note"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// errHookNotFound answers a hook that is absent or belongs to another tenant.
var errHookNotFound = NotFound("hook")

// view returns the hook as the API shows it.
func (h *TemplateHook) view() HookView {
	return HookView{ID: h.ID, ImageTemplateSlug: h.ImageTemplateSlug, HookType: h.HookType, HookTemplateSlug: h.HookTemplateSlug,
		Enabled: h.Enabled, Note: h.Note, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
}

// ListHooks returns the caller's hooks, optionally only those of one image template slug.
func (acs *AccountService) ListHooks(ctx context.Context, id *Identity, imageTemplateSlug string) ([]HookView, error) {
	a := acs.a
	if err := id.Require(CapHooks); err != nil {
		return nil, err
	}
	q := a.DB.WithContext(ctx).Where("tenant_id = ?", id.TenantID)
	if imageTemplateSlug != "" {
		q = q.Where("image_template_slug = ?", imageTemplateSlug)
	}
	var rows []TemplateHook
	if err := q.Order("image_template_slug, hook_type").Find(&rows).Error; err != nil {
		return nil, Internal("hook: list", err)
	}
	out := make([]HookView, len(rows))
	for i := range rows {
		out[i] = rows[i].view()
	}
	return out, nil
}

// UpsertHook stores the binding of in for the caller's tenant: a new hook, or an update of the one with
// the same image template slug and hook type. created tells which. The templates must exist and be
// visible to the tenant; only their slugs are stored.
func (acs *AccountService) UpsertHook(ctx context.Context, id *Identity, in HookInput) (view *HookView, created bool, err error) {
	a := acs.a
	if err := id.Require(CapHooks); err != nil {
		return nil, false, err
	}
	h := TemplateHook{ID: NewID(), TenantID: id.TenantID, ImageTemplateSlug: strings.TrimSpace(in.ImageTemplateSlug),
		HookType: strings.TrimSpace(in.HookType), HookTemplateSlug: strings.TrimSpace(in.HookTemplateSlug),
		Enabled: in.Enabled == nil || *in.Enabled, Note: strings.TrimSpace(in.Note)}
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := checkHook(tx, id, &h); err != nil {
			return err
		}
		now := a.Now()
		h.CreatedAt, h.UpdatedAt = now, now
		enabled := h.Enabled // GORM writes the column default (true) back over a false value on insert
		err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "image_template_slug"}, {Name: "hook_type"}},
			DoUpdates: clause.AssignmentColumns([]string{"hook_template_slug", "enabled", "note", "updated_at"}),
		}).Create(&h).Error
		if err != nil {
			return Internal("hook: upsert", err)
		}
		pair := []any{h.TenantID, h.ImageTemplateSlug, h.HookType}
		const byPair = "tenant_id = ? AND image_template_slug = ? AND hook_type = ?"
		if !enabled {
			if err := storeFalse(tx, &TemplateHook{}, "enabled", byPair, pair...); err != nil {
				return err
			}
		}
		var stored TemplateHook
		err = tx.Where(byPair, pair...).First(&stored).Error
		if err != nil {
			return Internal("hook: read back", err)
		}
		created = stored.ID == h.ID
		v := stored.view()
		view = &v
		return nil
	})
	if err != nil {
		return nil, false, asCoreError("hook: upsert", err)
	}
	return view, created, nil
}

// UpdateHook changes the fields present in p of one of the caller's hooks; another tenant's hook is 404.
func (acs *AccountService) UpdateHook(ctx context.Context, id *Identity, p HookPatch) (*HookView, error) {
	a := acs.a
	if err := id.Require(CapHooks); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.ID) == "" {
		return nil, Invalid("id is required")
	}
	if p.ImageTemplateSlug == nil && p.HookType == nil && p.HookTemplateSlug == nil && p.Enabled == nil && p.Note == nil {
		return nil, errNothingToChange
	}
	var view *HookView
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var h TemplateHook
		if err := tx.First(&h, "id = ? AND tenant_id = ?", p.ID, id.TenantID).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return errHookNotFound
			}
			return Internal("hook: load", err)
		}
		oldSlug, oldType := h.ImageTemplateSlug, h.HookType
		if p.ImageTemplateSlug != nil {
			h.ImageTemplateSlug = strings.TrimSpace(*p.ImageTemplateSlug)
		}
		if p.HookType != nil {
			h.HookType = strings.TrimSpace(*p.HookType)
		}
		if p.HookTemplateSlug != nil {
			h.HookTemplateSlug = strings.TrimSpace(*p.HookTemplateSlug)
		}
		if p.Enabled != nil {
			h.Enabled = *p.Enabled
		}
		if p.Note != nil {
			h.Note = strings.TrimSpace(*p.Note)
		}
		if err := checkHook(tx, id, &h); err != nil {
			return err
		}
		if h.ImageTemplateSlug != oldSlug || h.HookType != oldType {
			var n int64
			if err := tx.Model(&TemplateHook{}).Where("tenant_id = ? AND image_template_slug = ? AND hook_type = ? AND id <> ?",
				h.TenantID, h.ImageTemplateSlug, h.HookType, h.ID).Count(&n).Error; err != nil {
				return Internal("hook: check", err)
			}
			if n > 0 {
				return hookTaken(&h)
			}
		}
		h.UpdatedAt = a.Now()
		if err := tx.Save(&h).Error; err != nil {
			if isUniqueViolation(err) {
				return hookTaken(&h)
			}
			return Internal("hook: update", err)
		}
		v := h.view()
		view = &v
		return nil
	})
	if err != nil {
		return nil, asCoreError("hook: update", err)
	}
	return view, nil
}

// DeleteHook removes one of the caller's hooks; another tenant's hook is 404.
func (acs *AccountService) DeleteHook(ctx context.Context, id *Identity, hookID string) error {
	a := acs.a
	if err := id.Require(CapHooks); err != nil {
		return err
	}
	if strings.TrimSpace(hookID) == "" {
		return Invalid("id is required (in the JSON body or as ?id=)")
	}
	res := a.DB.WithContext(ctx).Delete(&TemplateHook{}, "id = ? AND tenant_id = ?", hookID, id.TenantID)
	if res.Error != nil {
		return Internal("hook: delete", res.Error)
	}
	if res.RowsAffected == 0 {
		return errHookNotFound
	}
	return nil
}

// hookTaken is the 409 of a change that would duplicate another hook's image template and hook type.
func hookTaken(h *TemplateHook) error {
	return Conflict(fmt.Sprintf("a %s hook for image template %q already exists; change that hook instead", h.HookType, h.ImageTemplateSlug))
}

// checkHook validates a hook: its type, its note, and that both slugs name templates the tenant sees (the
// image template an image template, the target a copy template for article hooks, a video template for
// video hooks).
func checkHook(tx *gorm.DB, id *Identity, h *TemplateHook) error {
	switch h.HookType {
	case HookArticle, HookVideo:
	case "":
		return Invalid("hook_type is required: article or video")
	default:
		return Invalid("hook_type must be article or video, not %q", h.HookType)
	}
	if h.ImageTemplateSlug == "" {
		return Invalid("image_template_slug is required")
	}
	if h.HookTemplateSlug == "" {
		return Invalid("hook_template_slug is required")
	}
	if utf8.RuneCountInString(h.Note) > maxHookNote {
		return Invalid("note is too long (at most %d characters)", maxHookNote)
	}
	v := newViewer(tx, id)
	var img Template
	found, err := visibleBySlug(tx, v, &img, "type = ? AND slug = ?", TemplateImage, h.ImageTemplateSlug)
	if err != nil {
		return err
	}
	if !found {
		return Invalid("image_template_slug %q names no image template you can see", h.ImageTemplateSlug)
	}
	if h.HookType == HookArticle {
		var t Template
		found, err = visibleBySlug(tx, v, &t, "type = ? AND slug = ?", TemplateArticle, h.HookTemplateSlug)
	} else {
		var t VideoTemplate
		found, err = visibleBySlug(tx, v, &t, "slug = ?", h.HookTemplateSlug)
	}
	if err != nil {
		return err
	}
	if !found {
		kind := "copy (article)"
		if h.HookType == HookVideo {
			kind = "video"
		}
		return Invalid("hook_template_slug %q names no %s template you can see", h.HookTemplateSlug, kind)
	}
	return nil
}

// visibleBySlug loads one template (*Template or *VideoTemplate) by the condition and reports whether it
// exists and the viewer sees it.
func visibleBySlug(tx *gorm.DB, v *viewer, dst interface{ ownership() templateOwnership }, cond string, args ...any) (bool, error) {
	err := tx.Where(cond, args...).First(dst).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return false, nil
	}
	if err != nil {
		return false, Internal("hook: load template", err)
	}
	ac, err := v.access(dst.ownership())
	if err != nil {
		return false, Internal("hook: access", err)
	}
	return ac.visible, nil
}
