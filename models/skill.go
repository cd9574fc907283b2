package models

import (
	"context"

	"studio/models/contract"
)

// Skill is one item of GET /api/skills (spec 2.4): the published view of an image template. It never
// carries prompt text.
type Skill struct {
	Slug        string  `json:"slug"`
	ZhName      string  `json:"zh_name"`
	Description string  `json:"description"`
	Ratio       string  `json:"ratio"`
	Genre       string  `json:"genre"`
	RefRequired bool    `json:"ref_required"`
	Thumb       *string `json:"thumb"`
	// Fields is nil (JSON null) for a one-sentence (spec-mode) skill, the form's text and textarea fields
	// for a form skill.
	Fields []contract.Field `json:"fields"`
}

// ListSkills returns the skills the caller may use, by slug: active image templates with a slug that the
// caller sees and may use (not locked). The first generation config decides: spec mode is a one-sentence
// skill; form mode is a form skill only when every field is text or textarea (contract.ValidateSkillFields).
// Templates whose form uses select fields are not published as skills; they stay usable by template_id
// or template_slug.
func (ts *TemplateService) ListSkills(ctx context.Context, id *Identity) ([]Skill, error) {
	a := ts.a
	if err := id.Require(CapReadTemplates); err != nil {
		return nil, err
	}
	db := a.DB.WithContext(ctx)
	v := newViewer(db, id)
	var rows []Template
	err := v.candidates(db.Model(&Template{})).
		Where("type = ? AND slug IS NOT NULL AND active = ?", TemplateImage, true).
		Order("slug").Find(&rows).Error
	if err != nil {
		return nil, Internal("skill: list", err)
	}
	out := []Skill{}
	for i := range rows {
		t := &rows[i]
		ac, err := v.access(t.ownership())
		if err != nil {
			return nil, Internal("skill: access", err)
		}
		if !ac.usable(t.Active) {
			continue
		}
		cfgs, err := t.ImageConfigs()
		if err != nil {
			return nil, err
		}
		fields, ok := skillFields(cfgs[0])
		if !ok {
			continue
		}
		s := Skill{Slug: *t.Slug, ZhName: t.ZhName, Description: t.Description, Ratio: t.Ratio, Genre: t.Genre,
			RefRequired: cfgs[0].RefRequired, Fields: fields}
		if images := decodeStrings(t.SampleImages); len(images) > 0 {
			s.Thumb = &images[0]
		}
		out = append(out, s)
	}
	return out, nil
}

// skillFields returns the skill fields of a generation config and whether it may be published as a
// skill: nil for spec mode, a non-nil list for a form whose fields pass contract.ValidateSkillFields.
func skillFields(c contract.ImageConfig) ([]contract.Field, bool) {
	mode, err := contract.ModeOf(c.PromptTemplate, c.Fields, c.SkillSpecMD)
	if err != nil {
		return nil, false
	}
	if mode == contract.ModeSpec {
		return nil, true
	}
	if contract.ValidateSkillFields(c.Fields) != nil {
		return nil, false
	}
	if c.Fields == nil {
		return []contract.Field{}, true
	}
	return c.Fields, true
}
