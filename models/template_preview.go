package models

import (
	"context"
	"errors"

	"gorm.io/gorm"
)

// TemplatePromptPreview returns the prompt that generating from an image or copy template with input
// would use: the form substitution of its first generation config (contract.Substitute), with no model
// call and nothing charged. The caller must see the template's prompt: a template it cannot see is
// KindNotFound, a gated one it holds no claim for KindForbidden; a spec-mode template or a missing or
// invalid field value is KindInvalid, as at generation.
func (ts *TemplateService) TemplatePromptPreview(ctx context.Context, id *Identity, templateID string, input map[string]any) (string, error) {
	a := ts.a
	if err := id.Require(CapReadTemplates); err != nil {
		return "", err
	}
	db := a.DB.WithContext(ctx)
	var t Template
	if err := db.First(&t, "id = ?", templateID).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return "", errTemplateNotFound
		}
		return "", Internal("template: load for preview", err)
	}
	ac, err := newViewer(db, id).access(t.ownership())
	if err != nil {
		return "", Internal("template: access", err)
	}
	switch {
	case !ac.visible:
		return "", errTemplateNotFound
	case ac.locked:
		return "", errLocked
	}
	return t.FormPrompt(input)
}
