package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"studio/models/contract"
)

// VideoTemplateInput is the body of POST /api/video-templates (D8). GenerationConfigs is a JSON array of
// contract.VideoConfig objects; at least one is required and the first is the one generation uses.
type VideoTemplateInput struct {
	Slug              string          `json:"slug"`
	ZhName            string          `json:"zh_name"`
	SampleCoverImage  string          `json:"sample_cover_image"`
	SampleVideoURL    string          `json:"sample_video_url"`
	Category          string          `json:"category"`
	Description       string          `json:"description"`
	GenerationConfigs json.RawMessage `json:"generation_configs"`
	// Active false creates the template deactivated; absent means active.
	Active *bool `json:"active"`
	// Gated is refused: a template becomes gated only when a claim code bundles it.
	Gated *bool `json:"gated"`
}

// VideoTemplatePatch is the body of PATCH /api/video-templates: the id and the fields to change.
type VideoTemplatePatch struct {
	ID                string          `json:"id"`
	Slug              *string         `json:"slug"`
	ZhName            *string         `json:"zh_name"`
	SampleCoverImage  *string         `json:"sample_cover_image"`
	SampleVideoURL    *string         `json:"sample_video_url"`
	Category          *string         `json:"category"`
	Description       *string         `json:"description"`
	GenerationConfigs json.RawMessage `json:"generation_configs"`
	Active            *bool           `json:"active"`
	// Gated is refused, as in TemplatePatch.
	Gated *bool `json:"gated"`
}

// VideoTemplateView is a video template as one caller may see it: a row of GET /api/video-templates.
// The cover and sample video are null when absent or when the template is locked.
type VideoTemplateView struct {
	ID                string            `json:"id"`
	Source            string            `json:"source"`
	Slug              string            `json:"slug"`
	ZhName            string            `json:"zh_name"`
	SampleCoverImage  *string           `json:"sample_cover_image"`
	SampleVideoURL    *string           `json:"sample_video_url"`
	Category          string            `json:"category"`
	Description       string            `json:"description"`
	GenerationConfigs []VideoConfigView `json:"generation_configs"`
	Active            bool              `json:"active"`
	Gated             bool              `json:"gated"`
	Locked            bool              `json:"locked"`
	CreatedAt         time.Time         `json:"created_at"`
	UpdatedAt         time.Time         `json:"updated_at"`
}

// VideoConfigView is one generation config of a video template as a caller may see it. Ratio, duration
// and resolution are null when the template leaves them to the submit.
type VideoConfigView struct {
	Mode           string           `json:"mode"`
	Model          string           `json:"model"`
	Ratio          *string          `json:"ratio"`
	Duration       *int             `json:"duration"`
	Resolution     *string          `json:"resolution"`
	PromptTemplate *string          `json:"prompt_template,omitempty"`
	Fields         []contract.Field `json:"fields"`
	SkillSpecMD    *string          `json:"skill_spec_md,omitempty"`
}

// ownership returns what the visibility rule reads of the video template.
func (t *VideoTemplate) ownership() templateOwnership {
	return templateOwnership{ID: t.ID, TenantID: t.TenantID, UserID: t.UserID, AuthorKind: t.AuthorKind,
		AuthorID: t.AuthorID, Active: t.Active, Gated: t.Gated}
}

// IsPlatform reports whether the video template is a platform template.
func (t *VideoTemplate) IsPlatform() bool { return t.ownership().platform() }

// VideoConfigs decodes the generation configs; the first is the one generation uses.
func (t *VideoTemplate) VideoConfigs() ([]contract.VideoConfig, error) {
	var cfgs []contract.VideoConfig
	if err := json.Unmarshal(t.GenerationConfigs, &cfgs); err != nil || len(cfgs) == 0 {
		return nil, Internal("video template: decode configs of "+t.ID, errors.Join(err, errors.New("no generation config")))
	}
	return cfgs, nil
}

// FormPrompt substitutes input into the prompt_template of the first generation config.
func (t *VideoTemplate) FormPrompt(input map[string]any) (string, error) {
	cfgs, err := t.VideoConfigs()
	if err != nil {
		return "", err
	}
	return formPrompt(cfgs[0].PromptTemplate, cfgs[0].Fields, input)
}

// CreateVideoTemplate creates a video template owned by the caller, with the ownership rules of
// CreateTemplate; slug and zh_name are required.
func (ts *TemplateService) CreateVideoTemplate(ctx context.Context, owner *Identity, in VideoTemplateInput) (*VideoTemplateView, error) {
	a := ts.a
	if err := owner.Require(CapWriteTemplates); err != nil {
		return nil, err
	}
	if in.Gated != nil {
		return nil, errGatedReadOnly
	}
	t := &VideoTemplate{ID: NewID(), Slug: strings.TrimSpace(in.Slug), ZhName: in.ZhName, SampleCoverImage: in.SampleCoverImage,
		SampleVideoURL: in.SampleVideoURL, Category: in.Category, Description: in.Description, Active: in.Active == nil || *in.Active}
	if err := setOwner(owner, &t.TenantID, &t.UserID, &t.AuthorKind, &t.AuthorID); err != nil {
		return nil, err
	}
	if err := prepareVideoTemplate(t, in.GenerationConfigs); err != nil {
		return nil, err
	}
	var view *VideoTemplateView
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.claimSlug(tx, &VideoTemplate{}, &t.Slug, ""); err != nil {
			return err
		}
		now := a.Now()
		t.CreatedAt, t.UpdatedAt = now, now
		active := t.Active // GORM writes the column default (true) back over a false value on insert
		if err := tx.Create(t).Error; err != nil {
			if isUniqueViolation(err) {
				return slugTaken(t.Slug)
			}
			return Internal("video template: create", err)
		}
		if t.Active = active; !active {
			if err := storeFalse(tx, &VideoTemplate{}, "active", "id = ?", t.ID); err != nil {
				return err
			}
		}
		var err error
		view, err = newViewer(tx, owner).videoTemplateView(t)
		return err
	})
	if err != nil {
		return nil, asCoreError("video template: create", err)
	}
	return view, nil
}

// UpdateVideoTemplate changes the fields present in p, with the rules of UpdateTemplate.
func (ts *TemplateService) UpdateVideoTemplate(ctx context.Context, id *Identity, p VideoTemplatePatch) (*VideoTemplateView, error) {
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
	if p.Slug == nil && p.ZhName == nil && p.SampleCoverImage == nil && p.SampleVideoURL == nil && p.Category == nil &&
		p.Description == nil && absentJSON(p.GenerationConfigs) && p.Active == nil {
		return nil, errNothingToChange
	}
	var view *VideoTemplateView
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var t VideoTemplate
		if err := tx.First(&t, "id = ?", p.ID).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return errTemplateNotFound
			}
			return Internal("video template: load", err)
		}
		v := newViewer(tx, id)
		if err := v.mayManage(t.ownership()); err != nil {
			return err
		}
		oldSlug := t.Slug
		if p.Slug != nil {
			t.Slug = strings.TrimSpace(*p.Slug)
		}
		setIf(&t.ZhName, p.ZhName)
		setIf(&t.SampleCoverImage, p.SampleCoverImage)
		setIf(&t.SampleVideoURL, p.SampleVideoURL)
		setIf(&t.Category, p.Category)
		setIf(&t.Description, p.Description)
		if p.Active != nil {
			t.Active = *p.Active
		}
		configs := json.RawMessage(t.GenerationConfigs)
		if !absentJSON(p.GenerationConfigs) {
			configs = p.GenerationConfigs
		}
		if err := prepareVideoTemplate(&t, configs); err != nil {
			return err
		}
		if t.Slug != oldSlug {
			if err := a.claimSlug(tx, &VideoTemplate{}, &t.Slug, t.ID); err != nil {
				return err
			}
		}
		t.UpdatedAt = a.Now()
		if err := tx.Save(&t).Error; err != nil {
			if isUniqueViolation(err) {
				return slugTaken(t.Slug)
			}
			return Internal("video template: update", err)
		}
		var err error
		view, err = v.videoTemplateView(&t)
		return err
	})
	if err != nil {
		return nil, asCoreError("video template: update", err)
	}
	return view, nil
}

// ListVideoTemplates returns the video templates the caller may see, newest first, filtered by source
// (mine, platform, all or "" for all).
func (ts *TemplateService) ListVideoTemplates(ctx context.Context, id *Identity, source string) ([]VideoTemplateView, error) {
	a := ts.a
	if err := id.Require(CapReadTemplates); err != nil {
		return nil, err
	}
	source, err := parseSource(source)
	if err != nil {
		return nil, err
	}
	db := a.DB.WithContext(ctx)
	v := newViewer(db, id)
	var rows []VideoTemplate
	if err := v.candidates(db.Model(&VideoTemplate{})).Order("created_at DESC, id").Find(&rows).Error; err != nil {
		return nil, Internal("video template: list", err)
	}
	out := make([]VideoTemplateView, 0, len(rows))
	for i := range rows {
		view, err := v.videoTemplateView(&rows[i])
		if err != nil {
			return nil, asCoreError("video template: list", err)
		}
		if view != nil && (source == SourceAll || view.Source == source) {
			out = append(out, *view)
		}
	}
	return out, nil
}

// VideoTemplateForUse returns the active video template with that id (or else slug), when the caller
// may generate from it: the rule of TemplateForUse.
func (ts *TemplateService) VideoTemplateForUse(ctx context.Context, id *Identity, idOrSlug string) (*VideoTemplate, error) {
	a := ts.a
	if strings.TrimSpace(idOrSlug) == "" {
		return nil, Invalid("template_id is required")
	}
	db := a.DB.WithContext(ctx)
	var rows []VideoTemplate
	if err := db.Where("id = ? OR slug = ?", idOrSlug, idOrSlug).Limit(2).Find(&rows).Error; err != nil {
		return nil, Internal("video template: load for use", err)
	}
	if len(rows) == 0 {
		return nil, errTemplateNotFound
	}
	t := &rows[0]
	for i := range rows {
		if rows[i].ID == idOrSlug {
			t = &rows[i]
		}
	}
	ac, err := newViewer(db, id).access(t.ownership())
	if err != nil {
		return nil, Internal("video template: access", err)
	}
	if !ac.visible || !t.Active {
		return nil, errTemplateNotFound
	}
	if ac.locked {
		return nil, errLocked
	}
	return t, nil
}

// videoTemplateView renders t for the viewer, or returns nil when the viewer may not see it.
func (v *viewer) videoTemplateView(t *VideoTemplate) (*VideoTemplateView, error) {
	ac, err := v.access(t.ownership())
	if err != nil || !ac.visible {
		return nil, err
	}
	view := &VideoTemplateView{ID: t.ID, Source: ac.source, Slug: t.Slug, ZhName: t.ZhName, Category: t.Category,
		Description: t.Description, Active: t.Active, Gated: t.Gated, Locked: ac.locked, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if !ac.locked {
		view.SampleCoverImage, view.SampleVideoURL = nonEmpty(t.SampleCoverImage), nonEmpty(t.SampleVideoURL)
	}
	cfgs, err := t.VideoConfigs()
	if err != nil {
		return nil, err
	}
	view.GenerationConfigs = make([]VideoConfigView, len(cfgs))
	for i, c := range cfgs {
		cv := VideoConfigView{Model: c.Model, Ratio: nonEmpty(c.Ratio), Resolution: nonEmpty(c.Resolution)}
		if c.Duration > 0 {
			d := c.Duration
			cv.Duration = &d
		}
		cv.Mode, cv.PromptTemplate, cv.Fields, cv.SkillSpecMD = recipeView(ac, c.PromptTemplate, c.Fields, c.SkillSpecMD)
		view.GenerationConfigs[i] = cv
	}
	return view, nil
}

// prepareVideoTemplate validates and normalises every column of a video template.
func prepareVideoTemplate(t *VideoTemplate, configs json.RawMessage) error {
	if err := checkName(&t.ZhName); err != nil {
		return err
	}
	if t.Slug == "" {
		return Invalid("slug is required for a video template (%s)", SlugPattern)
	}
	if err := checkSlug(t.Slug); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		v    *string
	}{{"sample_cover_image", &t.SampleCoverImage}, {"sample_video_url", &t.SampleVideoURL}} {
		*c.v = strings.TrimSpace(*c.v)
		if *c.v != "" {
			if err := checkURL(c.name, *c.v); err != nil {
				return err
			}
		}
	}
	t.Category = strings.TrimSpace(t.Category)
	if utf8.RuneCountInString(t.Category) > maxLabelLen {
		return Invalid("category is too long (at most %d characters)", maxLabelLen)
	}
	t.Description = strings.TrimSpace(t.Description)
	if utf8.RuneCountInString(t.Description) > maxDescriptionLen {
		return Invalid("description is too long (at most %d characters)", maxDescriptionLen)
	}
	if absentJSON(configs) {
		return Invalid("generation_configs is required: an array with at least one generation config")
	}
	var cfgs []contract.VideoConfig
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
	t.GenerationConfigs = mustJSON(cfgs)
	return nil
}

// nonEmpty returns a pointer to s, or nil when s is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
