package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"gorm.io/datatypes"
	"gorm.io/gorm"

	"studio/models/contract"
)

// Template types: image and copy templates share one collection (spec 2.3).
const (
	TemplateImage   = "image"
	TemplateArticle = "article"
)

// SlugPattern is the syntax of a template slug: lower-case ASCII letters, digits and "-", 2 to 64
// characters, not starting with "-". A slug that is also a UUID is refused so that an id and a slug
// never name different templates. Image and copy templates share one slug namespace, video templates
// have their own.
const SlugPattern = `^[a-z0-9][a-z0-9-]{1,63}$`

// SlugInputPattern is SlugPattern for an HTML pattern attribute: anchored by the browser, and "-"
// escaped in the class because browsers compile pattern with the v flag, where a bare "-" is invalid.
const SlugInputPattern = `[a-z0-9][a-z0-9\-]{1,63}`

var (
	slugRE = regexp.MustCompile(SlugPattern)
	keyRE  = regexp.MustCompile(contract.KeyPattern)
)

// Size limits of template columns.
const (
	maxNameLen        = 200
	maxLabelLen       = 64
	maxDescriptionLen = 2000
	maxURLLen         = 1000
	maxSampleImages   = 20
	maxConfigs        = 10
	maxVariableLabels = 50
)

// TemplateInput is the body of POST /api/templates and the input of CreateTemplateTx.
// GenerationConfigs is a JSON array of contract.ImageConfig (type image) or contract.ArticleConfig
// (type article) objects; at least one is required and the first is the one generation uses.
type TemplateInput struct {
	Type              string            `json:"type"`
	Slug              string            `json:"slug"`
	ZhName            string            `json:"zh_name"`
	Ratio             string            `json:"ratio"`
	SampleImages      []string          `json:"sample_images"`
	TemplateType      string            `json:"template_type"`
	Category          string            `json:"category"`
	Domain            string            `json:"domain"`
	Genre             string            `json:"genre"`
	Description       string            `json:"description"`
	VariableLabels    map[string]string `json:"variable_labels"`
	GenerationConfigs json.RawMessage   `json:"generation_configs"`
	// Active false creates the template deactivated; absent means active.
	Active *bool `json:"active"`
	// Gated is refused: a template becomes gated only when a claim code bundles it.
	Gated *bool `json:"gated"`
}

// TemplatePatch is the body of PATCH /api/templates: the id and the fields to change (absent = unchanged).
// GenerationConfigs, when present, replaces the whole array.
type TemplatePatch struct {
	ID                string             `json:"id"`
	Type              *string            `json:"type"`
	Slug              *string            `json:"slug"`
	ZhName            *string            `json:"zh_name"`
	Ratio             *string            `json:"ratio"`
	SampleImages      *[]string          `json:"sample_images"`
	TemplateType      *string            `json:"template_type"`
	Category          *string            `json:"category"`
	Domain            *string            `json:"domain"`
	Genre             *string            `json:"genre"`
	Description       *string            `json:"description"`
	VariableLabels    *map[string]string `json:"variable_labels"`
	GenerationConfigs json.RawMessage    `json:"generation_configs"`
	Active            *bool              `json:"active"`
	// Gated is refused: gating cannot be undone through the interface, nor set except by a claim code.
	Gated *bool `json:"gated"`
}

// TemplateFilter holds the query of GET /api/templates: Type image, article or "" (both); Source mine,
// platform, all or "" (all).
type TemplateFilter struct {
	Type   string
	Source string
}

// TemplateView is a template as one caller may see it: a row of GET /api/templates. Image rows carry
// the ImageColumns; copy rows do not. GenerationConfigs holds []ImageConfigView or []ArticleConfigView.
type TemplateView struct {
	ID     string  `json:"id"`
	Type   string  `json:"type"`
	Source string  `json:"source"`
	Slug   *string `json:"slug"`
	ZhName string  `json:"zh_name"`
	*ImageColumns
	TemplateType      string    `json:"template_type"`
	Category          string    `json:"category"`
	Description       string    `json:"description"`
	GenerationConfigs any       `json:"generation_configs"`
	Active            bool      `json:"active"`
	Gated             bool      `json:"gated"`
	Locked            bool      `json:"locked"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// ImageColumns are the columns only image templates expose.
type ImageColumns struct {
	Ratio          string            `json:"ratio"`
	SampleImages   []string          `json:"sample_images"`
	Domain         string            `json:"domain"`
	Genre          string            `json:"genre"`
	VariableLabels map[string]string `json:"variable_labels,omitempty"`
}

// ImageConfigView is one generation config of an image template as a caller may see it: prompt_template
// and default_reference_images are absent when the template is locked, skill_spec_md unless the caller
// is the administrator or the author.
type ImageConfigView struct {
	Mode                   string           `json:"mode"`
	Model                  string           `json:"model"`
	PromptTemplate         *string          `json:"prompt_template,omitempty"`
	Fields                 []contract.Field `json:"fields"`
	SkillSpecMD            *string          `json:"skill_spec_md,omitempty"`
	RefRequired            bool             `json:"ref_required"`
	DefaultReferenceImages []string         `json:"default_reference_images,omitempty"`
	Quality                string           `json:"quality,omitempty"`
}

// ArticleConfigView is one generation config of a copy template as a caller may see it.
type ArticleConfigView struct {
	Mode           string           `json:"mode"`
	Format         string           `json:"format"`
	PromptTemplate *string          `json:"prompt_template,omitempty"`
	Fields         []contract.Field `json:"fields"`
	SkillSpecMD    *string          `json:"skill_spec_md,omitempty"`
}

// TemplateRef names the image template of a generation request: exactly one of ID (template_id), Slug
// (template_slug) and SkillSlug (skill_slug).
type TemplateRef struct {
	ID        string
	Slug      string
	SkillSlug string
}

// errLocked refuses generation from a gated template the caller holds no claim for.
var errLocked = Forbidden("template is locked: it is gated and only its owner and holders of a claim for it may use it")

// errTemplateNotFound is the one answer for a template that is absent, not visible or not usable.
var errTemplateNotFound = NotFound("template")

// ownership returns what the visibility rule reads of the template.
func (t *Template) ownership() templateOwnership {
	return templateOwnership{ID: t.ID, TenantID: t.TenantID, UserID: t.UserID, AuthorKind: t.AuthorKind,
		AuthorID: t.AuthorID, Active: t.Active, Gated: t.Gated}
}

// IsPlatform reports whether the template is a platform template (no tenant and no personal owner).
func (t *Template) IsPlatform() bool { return t.ownership().platform() }

// ImageConfigs decodes the generation configs of an image template; the first is the one generation uses.
func (t *Template) ImageConfigs() ([]contract.ImageConfig, error) {
	if t.Type != TemplateImage {
		return nil, Invalid("template %s is a %s template, not an image template", t.ID, t.Type)
	}
	var cfgs []contract.ImageConfig
	if err := json.Unmarshal(t.GenerationConfigs, &cfgs); err != nil || len(cfgs) == 0 {
		return nil, Internal("template: decode image configs of "+t.ID, errors.Join(err, errors.New("no generation config")))
	}
	return cfgs, nil
}

// ArticleConfigs decodes the generation configs of a copy template; the first is the one generation uses.
func (t *Template) ArticleConfigs() ([]contract.ArticleConfig, error) {
	if t.Type != TemplateArticle {
		return nil, Invalid("template %s is a %s template, not a copy (article) template", t.ID, t.Type)
	}
	var cfgs []contract.ArticleConfig
	if err := json.Unmarshal(t.GenerationConfigs, &cfgs); err != nil || len(cfgs) == 0 {
		return nil, Internal("template: decode article configs of "+t.ID, errors.Join(err, errors.New("no generation config")))
	}
	return cfgs, nil
}

// FormPrompt substitutes input into the prompt_template of the template's first generation config.
// A spec-mode template, a missing required field or a bad value is KindInvalid (400).
func (t *Template) FormPrompt(input map[string]any) (string, error) {
	var tpl string
	var fields []contract.Field
	switch t.Type {
	case TemplateImage:
		cfgs, err := t.ImageConfigs()
		if err != nil {
			return "", err
		}
		tpl, fields = cfgs[0].PromptTemplate, cfgs[0].Fields
	default:
		cfgs, err := t.ArticleConfigs()
		if err != nil {
			return "", err
		}
		tpl, fields = cfgs[0].PromptTemplate, cfgs[0].Fields
	}
	return formPrompt(tpl, fields, input)
}

// formPrompt substitutes input into a form-mode recipe.
func formPrompt(tpl string, fields []contract.Field, input map[string]any) (string, error) {
	if strings.TrimSpace(tpl) == "" {
		return "", Invalid("this template takes a one-sentence description (spec mode), not field values")
	}
	out, err := contract.Substitute(tpl, fields, input)
	if err != nil {
		return "", ContractError("", err)
	}
	return out, nil
}

// ContractError turns an error of the contract package into a KindInvalid core error; path, when not
// empty, prefixes the member the contract names (for example "generation_configs[1]").
func ContractError(path string, err error) error {
	var ve *contract.ValidationError
	if errors.As(err, &ve) {
		p := ve.Path
		if path != "" {
			p = strings.TrimSuffix(path+"."+ve.Path, ".")
		}
		if p == "" {
			return Invalid("%s", ve.Reason)
		}
		return Invalid("%s: %s", p, ve.Reason)
	}
	var mf *contract.MissingFieldsError
	if errors.As(err, &mf) {
		return Invalid("%s", mf.Error())
	}
	return asCoreError("template: contract", err)
}

// CreateTemplate creates an image or copy template owned by the caller: the caller's tenant with a tenant
// key, the platform (no owner, shared) with the administrator key, the caller with a personal login.
func (ts *TemplateService) CreateTemplate(ctx context.Context, owner *Identity, in TemplateInput) (*TemplateView, error) {
	a := ts.a
	if err := owner.Require(CapWriteTemplates); err != nil {
		return nil, err
	}
	var view *TemplateView
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		t, err := a.Templates().CreateTemplateTx(tx, owner, in)
		if err != nil {
			return err
		}
		view, err = newViewer(tx, owner).templateView(t)
		return err
	})
	if err != nil {
		return nil, asCoreError("template: create", err)
	}
	return view, nil
}

// CreateTemplateTx validates and stores a template inside the caller's transaction (image-to-template
// uses it); ownership is as in CreateTemplate.
func (ts *TemplateService) CreateTemplateTx(tx *gorm.DB, owner *Identity, in TemplateInput) (*Template, error) {
	a := ts.a
	if in.Gated != nil {
		return nil, errGatedReadOnly
	}
	t := &Template{ID: NewID(), Type: strings.TrimSpace(in.Type), ZhName: in.ZhName, Ratio: in.Ratio,
		TemplateType: in.TemplateType, Category: in.Category, Domain: in.Domain, Genre: in.Genre,
		Description: in.Description, Active: in.Active == nil || *in.Active}
	if err := setOwner(owner, &t.TenantID, &t.UserID, &t.AuthorKind, &t.AuthorID); err != nil {
		return nil, err
	}
	if s := strings.TrimSpace(in.Slug); s != "" {
		t.Slug = &s
	}
	if err := prepareTemplate(t, in.SampleImages, in.VariableLabels, in.GenerationConfigs); err != nil {
		return nil, err
	}
	if err := a.claimSlug(tx, &Template{}, t.Slug, ""); err != nil {
		return nil, err
	}
	now := a.Now()
	t.CreatedAt, t.UpdatedAt = now, now
	active := t.Active // GORM writes the column default (true) back over a false value on insert
	if err := tx.Create(t).Error; err != nil {
		if isUniqueViolation(err) {
			return nil, slugTaken(*t.Slug)
		}
		return nil, Internal("template: create", err)
	}
	if t.Active = active; !active {
		if err := storeFalse(tx, &Template{}, "active", "id = ?", t.ID); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// UpdateTemplate changes the fields present in p, validating the result as at creation. Only the owner
// changes a template (the administrator the platform ones); one the caller cannot see is 404.
func (ts *TemplateService) UpdateTemplate(ctx context.Context, id *Identity, p TemplatePatch) (*TemplateView, error) {
	a := ts.a
	if err := id.Require(CapWriteTemplates); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.ID) == "" {
		return nil, Invalid("id is required")
	}
	if p.Gated != nil {
		return nil, errGatedReadOnly
	}
	if p.empty() {
		return nil, errNothingToChange
	}
	var view *TemplateView
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var t Template
		if err := tx.First(&t, "id = ?", p.ID).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return errTemplateNotFound
			}
			return Internal("template: load", err)
		}
		v := newViewer(tx, id)
		if err := v.mayManage(t.ownership()); err != nil {
			return err
		}
		if p.Type != nil && strings.TrimSpace(*p.Type) != t.Type {
			return Invalid("type cannot be changed (this is a %s template); create a new template instead", t.Type)
		}
		oldSlug := t.Slug
		if p.Slug != nil {
			s := strings.TrimSpace(*p.Slug)
			if s == "" {
				return Invalid("slug cannot be removed; deactivate the template with active false instead")
			}
			t.Slug = &s
		}
		setIf(&t.ZhName, p.ZhName)
		setIf(&t.Ratio, p.Ratio)
		setIf(&t.TemplateType, p.TemplateType)
		setIf(&t.Category, p.Category)
		setIf(&t.Domain, p.Domain)
		setIf(&t.Genre, p.Genre)
		setIf(&t.Description, p.Description)
		if p.Active != nil {
			t.Active = *p.Active
		}
		images := decodeStrings(t.SampleImages)
		if p.SampleImages != nil {
			images = *p.SampleImages
		}
		labels := decodeLabels(t.VariableLabels)
		if p.VariableLabels != nil {
			labels = *p.VariableLabels
		}
		configs := json.RawMessage(t.GenerationConfigs)
		if !absentJSON(p.GenerationConfigs) {
			configs = p.GenerationConfigs
		}
		if err := prepareTemplate(&t, images, labels, configs); err != nil {
			return err
		}
		if t.Slug != nil && (oldSlug == nil || *oldSlug != *t.Slug) {
			if err := a.claimSlug(tx, &Template{}, t.Slug, t.ID); err != nil {
				return err
			}
		}
		t.UpdatedAt = a.Now()
		if err := tx.Save(&t).Error; err != nil {
			if isUniqueViolation(err) {
				return slugTaken(*t.Slug)
			}
			return Internal("template: update", err)
		}
		var err error
		view, err = v.templateView(&t)
		return err
	})
	if err != nil {
		return nil, asCoreError("template: update", err)
	}
	return view, nil
}

// empty reports whether the patch changes nothing.
func (p TemplatePatch) empty() bool {
	return p.Type == nil && p.Slug == nil && p.ZhName == nil && p.Ratio == nil && p.SampleImages == nil &&
		p.TemplateType == nil && p.Category == nil && p.Domain == nil && p.Genre == nil && p.Description == nil &&
		p.VariableLabels == nil && absentJSON(p.GenerationConfigs) && p.Active == nil
}

// errNothingToChange refuses a change body that carries only the id.
var errNothingToChange = Invalid("nothing to change: send id and at least one field to change")

// absentJSON reports whether an optional raw JSON member was absent or null.
func absentJSON(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// ListTemplates returns the image and copy templates the caller may see, newest first, filtered by f.
// An unknown type or source is KindInvalid.
func (ts *TemplateService) ListTemplates(ctx context.Context, id *Identity, f TemplateFilter) ([]TemplateView, error) {
	a := ts.a
	if err := id.Require(CapReadTemplates); err != nil {
		return nil, err
	}
	switch f.Type {
	case "", TemplateImage, TemplateArticle:
	default:
		return nil, Invalid("type must be image or article (omit it for both), not %q", f.Type)
	}
	source, err := parseSource(f.Source)
	if err != nil {
		return nil, err
	}
	db := a.DB.WithContext(ctx)
	v := newViewer(db, id)
	q := v.candidates(db.Model(&Template{}))
	if f.Type != "" {
		q = q.Where("type = ?", f.Type)
	}
	var rows []Template
	if err := q.Order("created_at DESC, id").Find(&rows).Error; err != nil {
		return nil, Internal("template: list", err)
	}
	out := make([]TemplateView, 0, len(rows))
	for i := range rows {
		view, err := v.templateView(&rows[i])
		if err != nil {
			return nil, asCoreError("template: list", err)
		}
		if view != nil && (source == SourceAll || view.Source == source) {
			out = append(out, *view)
		}
	}
	return out, nil
}

// TemplateForUse returns the active image template that ref names, when the caller may generate from
// it. Absent, invisible, inactive (and, for a skill slug, unpublished) templates are 404 "template not
// found"; a gated template the caller holds no claim for is 403.
func (ts *TemplateService) TemplateForUse(ctx context.Context, id *Identity, ref TemplateRef) (*Template, error) {
	a := ts.a
	q := a.DB.WithContext(ctx).Where("type = ?", TemplateImage)
	switch {
	case ref.ID != "" && ref.Slug == "" && ref.SkillSlug == "":
		q = q.Where("id = ?", ref.ID)
	case ref.Slug != "" && ref.ID == "" && ref.SkillSlug == "":
		q = q.Where("slug = ?", ref.Slug)
	case ref.SkillSlug != "" && ref.ID == "" && ref.Slug == "":
		q = q.Where("slug = ?", ref.SkillSlug)
	default:
		return nil, Invalid("name the template with exactly one of template_id, template_slug and skill_slug")
	}
	t, err := a.templateForUse(ctx, id, q)
	if err != nil {
		return nil, err
	}
	if ref.SkillSlug != "" {
		cfgs, err := t.ImageConfigs()
		if err != nil {
			return nil, err
		}
		if _, ok := skillFields(cfgs[0]); !ok {
			return nil, errTemplateNotFound
		}
	}
	return t, nil
}

// ArticleTemplateForUse returns the active copy template with the slug, when the caller may use it
// (the same rule as TemplateForUse).
func (ts *TemplateService) ArticleTemplateForUse(ctx context.Context, id *Identity, slug string) (*Template, error) {
	a := ts.a
	if strings.TrimSpace(slug) == "" {
		return nil, Invalid("template_slug is required")
	}
	return a.templateForUse(ctx, id, a.DB.WithContext(ctx).Where("type = ? AND slug = ?", TemplateArticle, slug))
}

// templateForUse loads the one template q selects and applies the visibility rule for generation.
func (a *App) templateForUse(ctx context.Context, id *Identity, q *gorm.DB) (*Template, error) {
	var t Template
	if err := q.First(&t).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, errTemplateNotFound
		}
		return nil, Internal("template: load for use", err)
	}
	ac, err := newViewer(a.DB.WithContext(ctx), id).access(t.ownership())
	if err != nil {
		return nil, Internal("template: access", err)
	}
	if !ac.visible || !t.Active {
		return nil, errTemplateNotFound
	}
	if ac.locked {
		return nil, errLocked
	}
	return &t, nil
}

// DeleteTemplate removes a template of either collection, with the claim grants on it; it is the
// administrator action template-delete (spec 4.8: tenants cannot delete templates). Hooks keep their
// slugs (they are read at use time).
func (ts *TemplateService) DeleteTemplate(ctx context.Context, templateID string) error {
	a := ts.a
	if strings.TrimSpace(templateID) == "" {
		return Invalid("id is required")
	}
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Delete(&Template{}, "id = ?", templateID)
		if res.Error != nil {
			return Internal("template: delete", res.Error)
		}
		n := res.RowsAffected
		if n == 0 {
			res = tx.Delete(&VideoTemplate{}, "id = ?", templateID)
			if res.Error != nil {
				return Internal("template: delete video template", res.Error)
			}
			n = res.RowsAffected
		}
		if n == 0 {
			return errTemplateNotFound
		}
		if err := tx.Delete(&TemplateGrant{}, "template_id = ?", templateID).Error; err != nil {
			return Internal("template: delete grants", err)
		}
		return nil
	})
	if err != nil {
		return asCoreError("template: delete", err)
	}
	return nil
}

// GateTemplatesTx marks templates (of either collection) gated inside the caller's transaction; claim
// code creation calls it. An unknown id is KindNotFound and nothing is changed by the caller's rollback.
func (ts *TemplateService) GateTemplatesTx(tx *gorm.DB, ids []string) error {
	a := ts.a
	seen := map[string]bool{}
	var unique []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	if len(unique) == 0 {
		return nil
	}
	var n1, n2 int64
	if err := tx.Model(&Template{}).Where("id IN ?", unique).Count(&n1).Error; err != nil {
		return Internal("template: gate", err)
	}
	if err := tx.Model(&VideoTemplate{}).Where("id IN ?", unique).Count(&n2).Error; err != nil {
		return Internal("template: gate", err)
	}
	if n1+n2 < int64(len(unique)) {
		return errTemplateNotFound
	}
	now := a.Now()
	if err := tx.Model(&Template{}).Where("id IN ?", unique).Updates(map[string]any{"gated": true, "updated_at": now}).Error; err != nil {
		return Internal("template: gate", err)
	}
	if err := tx.Model(&VideoTemplate{}).Where("id IN ?", unique).Updates(map[string]any{"gated": true, "updated_at": now}).Error; err != nil {
		return Internal("template: gate", err)
	}
	return nil
}

// registerTemplateAdmin adds the administrator actions on templates (template-delete).
func registerTemplateAdmin(r *AdminActions, a *App) {
	r.Register(AdminAction{
		Name: "template-delete", Summary: "delete an image, copy or video template (tenants cannot delete templates)",
		Params: []AdminParam{{"id", "string", "template id", true}},
		Run: adminRun(func(ctx context.Context, in struct {
			ID string `json:"id"`
		}) (any, error) {
			if err := a.Templates().DeleteTemplate(ctx, in.ID); err != nil {
				return nil, err
			}
			return map[string]any{"ok": true}, nil
		}),
	})
}

// errGatedReadOnly refuses gated in a create or change body.
var errGatedReadOnly = Invalid("gated cannot be set or changed here: a template becomes gated when a claim code bundles it, and gating cannot be undone")

// mayManage returns nil when the caller may change the template: 404 when it cannot see it, 403 when it
// sees it but does not own it (platform templates belong to the administrator).
func (v *viewer) mayManage(o templateOwnership) error {
	ac, err := v.access(o)
	if err != nil {
		return Internal("template: access", err)
	}
	switch {
	case !ac.visible:
		return errTemplateNotFound
	case !ac.manage && o.platform():
		return Forbidden("platform templates are changed only by the platform administrator")
	case !ac.manage:
		return Forbidden("only the tenant key or the personal login that owns a template may change it")
	}
	return nil
}

// templateView renders t for the viewer, or returns nil when the viewer may not see it.
func (v *viewer) templateView(t *Template) (*TemplateView, error) {
	ac, err := v.access(t.ownership())
	if err != nil || !ac.visible {
		return nil, err
	}
	view := &TemplateView{ID: t.ID, Type: t.Type, Source: ac.source, Slug: t.Slug, ZhName: t.ZhName,
		TemplateType: t.TemplateType, Category: t.Category, Description: t.Description,
		Active: t.Active, Gated: t.Gated, Locked: ac.locked, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	switch t.Type {
	case TemplateImage:
		images := decodeStrings(t.SampleImages)
		if ac.locked {
			images = []string{}
		}
		view.ImageColumns = &ImageColumns{Ratio: t.Ratio, SampleImages: images, Domain: t.Domain, Genre: t.Genre,
			VariableLabels: decodeLabels(t.VariableLabels)}
		cfgs, err := t.ImageConfigs()
		if err != nil {
			return nil, err
		}
		out := make([]ImageConfigView, len(cfgs))
		for i, c := range cfgs {
			out[i] = ImageConfigView{Model: c.Model, RefRequired: c.RefRequired, Quality: c.Quality}
			out[i].Mode, out[i].PromptTemplate, out[i].Fields, out[i].SkillSpecMD = recipeView(ac, c.PromptTemplate, c.Fields, c.SkillSpecMD)
			if !ac.locked {
				out[i].DefaultReferenceImages = c.DefaultReferenceImages
			}
		}
		view.GenerationConfigs = out
	default:
		cfgs, err := t.ArticleConfigs()
		if err != nil {
			return nil, err
		}
		out := make([]ArticleConfigView, len(cfgs))
		for i, c := range cfgs {
			out[i] = ArticleConfigView{Format: c.Format}
			out[i].Mode, out[i].PromptTemplate, out[i].Fields, out[i].SkillSpecMD = recipeView(ac, c.PromptTemplate, c.Fields, c.SkillSpecMD)
		}
		view.GenerationConfigs = out
	}
	return view, nil
}

// recipeView applies the visibility rule to the recipe of one generation config: the mode, the prompt
// template unless locked, the fields, and skill_spec_md only for the administrator and the author.
func recipeView(ac access, prompt string, fields []contract.Field, spec string) (mode string, promptOut *string, fieldsOut []contract.Field, specOut *string) {
	fieldsOut = fields
	if fieldsOut == nil {
		fieldsOut = []contract.Field{}
	}
	if strings.TrimSpace(spec) != "" {
		if ac.spec {
			specOut = &spec
		}
		return string(contract.ModeSpec), nil, fieldsOut, specOut
	}
	if !ac.locked {
		promptOut = &prompt
	}
	return string(contract.ModeForm), promptOut, fieldsOut, nil
}

// prepareTemplate validates and normalises every column of t (the same rules at creation and change)
// and stores the sample images, variable labels and generation configs.
func prepareTemplate(t *Template, images []string, labels map[string]string, configs json.RawMessage) error {
	switch t.Type {
	case TemplateImage, TemplateArticle:
	case "":
		return Invalid("type is required: image or article")
	default:
		return Invalid("type must be image or article, not %q", t.Type)
	}
	if err := checkName(&t.ZhName); err != nil {
		return err
	}
	if t.Slug != nil {
		if err := checkSlug(*t.Slug); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		name string
		v    *string
	}{{"template_type", &t.TemplateType}, {"category", &t.Category}, {"domain", &t.Domain}, {"genre", &t.Genre}, {"ratio", &t.Ratio}} {
		*c.v = strings.TrimSpace(*c.v)
		if utf8.RuneCountInString(*c.v) > maxLabelLen {
			return Invalid("%s is too long (at most %d characters)", c.name, maxLabelLen)
		}
	}
	t.Description = strings.TrimSpace(t.Description)
	if utf8.RuneCountInString(t.Description) > maxDescriptionLen {
		return Invalid("description is too long (at most %d characters)", maxDescriptionLen)
	}
	if absentJSON(configs) {
		return Invalid("generation_configs is required: an array with at least one generation config")
	}
	var err error
	if t.Type == TemplateArticle {
		err = prepareArticle(t, images, labels, configs)
	} else {
		err = prepareImage(t, images, labels, configs)
	}
	return err
}

// prepareImage checks the image columns and configs of t.
func prepareImage(t *Template, images []string, labels map[string]string, configs json.RawMessage) error {
	if t.Ratio != "" {
		if _, _, err := contract.ParseRatio(t.Ratio); err != nil {
			return ContractError("", err)
		}
	}
	if len(images) > maxSampleImages {
		return Invalid("sample_images: at most %d images", maxSampleImages)
	}
	for i, u := range images {
		if err := checkURL(fmt.Sprintf("sample_images[%d]", i), u); err != nil {
			return err
		}
	}
	if images == nil {
		images = []string{}
	}
	if len(labels) > maxVariableLabels {
		return Invalid("variable_labels: at most %d labels", maxVariableLabels)
	}
	for k, v := range labels {
		if !keyRE.MatchString(k) {
			return Invalid("variable_labels: %q is not a placeholder key (%s)", k, contract.KeyPattern)
		}
		if strings.TrimSpace(v) == "" || utf8.RuneCountInString(v) > maxLabelLen {
			return Invalid("variable_labels.%s: a label of 1 to %d characters is required", k, maxLabelLen)
		}
	}
	var cfgs []contract.ImageConfig
	if err := decodeConfigs(configs, &cfgs); err != nil {
		return err
	}
	for i := range cfgs {
		if cfgs[i].Model == "" {
			cfgs[i].Model = contract.ModelAuto
		}
		if err := cfgs[i].Validate(); err != nil {
			return ContractError(fmt.Sprintf("generation_configs[%d]", i), err)
		}
	}
	t.SampleImages = mustJSON(images)
	t.VariableLabels = nil
	if len(labels) > 0 {
		t.VariableLabels = mustJSON(labels)
	}
	t.GenerationConfigs = mustJSON(cfgs)
	return nil
}

// prepareArticle checks the columns and configs of a copy template; image-only columns are refused.
func prepareArticle(t *Template, images []string, labels map[string]string, configs json.RawMessage) error {
	for _, c := range []struct {
		name string
		set  bool
	}{{"ratio", t.Ratio != ""}, {"sample_images", len(images) > 0}, {"domain", t.Domain != ""}, {"genre", t.Genre != ""}, {"variable_labels", len(labels) > 0}} {
		if c.set {
			return Invalid("%s is only used by image templates", c.name)
		}
	}
	switch t.TemplateType {
	case "", TemplateArticle:
		t.TemplateType = TemplateArticle
	default:
		return Invalid("template_type of a copy template is always article, not %q", t.TemplateType)
	}
	var cfgs []contract.ArticleConfig
	if err := decodeConfigs(configs, &cfgs); err != nil {
		return err
	}
	for i, c := range cfgs {
		if err := c.Validate(); err != nil {
			return ContractError(fmt.Sprintf("generation_configs[%d]", i), err)
		}
	}
	t.SampleImages, t.VariableLabels = nil, nil
	t.GenerationConfigs = mustJSON(cfgs)
	return nil
}

// decodeConfigs reads a JSON array of between 1 and maxConfigs generation configs into out (a slice pointer).
func decodeConfigs(raw json.RawMessage, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Invalid("generation_configs: %s must be %s", te.Field, jsonTypeName(te.Type.Kind().String()))
		}
		return Invalid("generation_configs must be an array of generation config objects")
	}
	n := 0
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		n = len(list)
	}
	if n == 0 {
		return Invalid("generation_configs is required: an array with at least one generation config")
	}
	if n > maxConfigs {
		return Invalid("generation_configs: at most %d generation configs", maxConfigs)
	}
	return nil
}

// checkName trims and checks zh_name, required on every kind of template.
func checkName(name *string) error {
	*name = strings.TrimSpace(*name)
	if *name == "" {
		return Invalid("zh_name is required")
	}
	if utf8.RuneCountInString(*name) > maxNameLen {
		return Invalid("zh_name is too long (at most %d characters)", maxNameLen)
	}
	return nil
}

// checkSlug checks a slug against SlugPattern.
func checkSlug(s string) error {
	if !slugRE.MatchString(s) {
		return Invalid("slug %q is invalid: use 2 to 64 lower-case letters, digits and -, starting with a letter or digit (%s)", s, SlugPattern)
	}
	if _, err := uuid.Parse(s); err == nil {
		return Invalid("slug %q is invalid: a slug must not be a UUID", s)
	}
	return nil
}

// checkURL checks that s is an absolute http or https URL.
func checkURL(path, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(s) > maxURLLen || strings.ContainsAny(s, " \t\r\n") {
		return Invalid("%s: %q is not an http or https URL", path, s)
	}
	return nil
}

// claimSlug refuses a slug already used by another row (not self) of model's table with 409.
func (a *App) claimSlug(tx *gorm.DB, model any, slug *string, self string) error {
	if slug == nil {
		return nil
	}
	var n int64
	if err := tx.Model(model).Where("slug = ? AND id <> ?", *slug, self).Count(&n).Error; err != nil {
		return Internal("template: check slug", err)
	}
	if n > 0 {
		return slugTaken(*slug)
	}
	return nil
}

// slugTaken is the 409 of a slug conflict.
func slugTaken(slug string) error {
	return Conflict(fmt.Sprintf("slug %q is already taken: slugs are unique across the service, choose another", slug))
}

// isUniqueViolation reports whether err is a unique constraint violation on either database.
func isUniqueViolation(err error) bool {
	return errors.Is(err, gorm.ErrDuplicatedKey) || containsFold(err.Error(), "UNIQUE constraint failed", "duplicate key value", "SQLSTATE 23505")
}

// storeFalse writes a false boolean that GORM replaced by the column default (true) on insert.
func storeFalse(tx *gorm.DB, model any, column string, cond string, args ...any) error {
	if err := tx.Model(model).Where(cond, args...).UpdateColumn(column, false).Error; err != nil {
		return Internal("store "+column, err)
	}
	return nil
}

// containsFold reports whether s contains any of subs, ignoring case.
func containsFold(s string, subs ...string) bool {
	s = strings.ToLower(s)
	for _, sub := range subs {
		if strings.Contains(s, strings.ToLower(sub)) {
			return true
		}
	}
	return false
}

// setOwner fills the owner and author columns of a new template from the identity creating it.
func setOwner(id *Identity, tenantID, userID **string, authorKind, authorID *string) error {
	switch id.Kind {
	case IdentityTenant:
		t := id.TenantID
		*tenantID, *authorKind, *authorID = &t, string(IdentityTenant), id.TenantID
	case IdentityUser:
		u := id.UserID
		*userID, *authorKind, *authorID = &u, string(IdentityUser), id.UserID
	case IdentityAdmin:
		*authorKind = string(IdentityAdmin)
	default:
		return Forbidden("a member account key cannot create or change templates; use the tenant key")
	}
	return nil
}

// parseSource checks the source filter of a listing; "" means all.
func parseSource(s string) (string, error) {
	switch s {
	case "":
		return SourceAll, nil
	case SourceMine, SourcePlatform, SourceAll:
		return s, nil
	}
	return "", Invalid("source must be mine, platform or all, not %q", s)
}

// setIf sets *dst to *src when src is present.
func setIf(dst *string, src *string) {
	if src != nil {
		*dst = *src
	}
}

// decodeStrings reads a stored JSON array of strings; never nil.
func decodeStrings(raw datatypes.JSON) []string {
	out := []string{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &out)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// decodeLabels reads stored variable labels; nil when none.
func decodeLabels(raw datatypes.JSON) map[string]string {
	var out map[string]string
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &out)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// mustJSON encodes a value built from decoded JSON, which cannot fail.
func mustJSON(v any) datatypes.JSON {
	b, err := json.Marshal(v)
	if err != nil {
		panic("template: encode: " + err.Error())
	}
	return b
}

// TemplateService holds image and video templates and the skills behind them.
type TemplateService struct{ a *App }

// Templates returns the templates.
func (a *App) Templates() *TemplateService { return a.svc.templates }
