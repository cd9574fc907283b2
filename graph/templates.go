package graph

import (
	"context"

	"studio/models"
)

// Templates lists the image and copy templates the caller may see (GET /api/templates).
func (r *queryResolver) Templates(ctx context.Context, typeArg *string, source *string) ([]models.TemplateView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Templates().ListTemplates(ctx, id, models.TemplateFilter{Type: deref(typeArg), Source: deref(source)})
}

// VideoTemplates lists the video templates the caller may see (GET /api/video-templates).
func (r *queryResolver) VideoTemplates(ctx context.Context, source *string) ([]models.VideoTemplateView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Templates().ListVideoTemplates(ctx, id, deref(source))
}

// Skills lists the published skills (GET /api/skills).
func (r *queryResolver) Skills(ctx context.Context) ([]models.Skill, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Templates().ListSkills(ctx, id)
}

// TemplateHooks lists the tenant's pipeline hooks (GET /api/template-hooks).
func (r *queryResolver) TemplateHooks(ctx context.Context, imageTemplateSlug *string) ([]models.HookView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Accounts().ListHooks(ctx, id, deref(imageTemplateSlug))
}

// CreateTemplate creates an image or copy template (POST /api/templates).
func (r *mutationResolver) CreateTemplate(ctx context.Context, input models.TemplateInput) (*models.TemplateView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Templates().CreateTemplate(ctx, id, input)
}

// UpdateTemplate changes a template (PATCH /api/templates).
func (r *mutationResolver) UpdateTemplate(ctx context.Context, input models.TemplatePatch) (*models.TemplateView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Templates().UpdateTemplate(ctx, id, input)
}

// CreateVideoTemplate creates a video template (POST /api/video-templates).
func (r *mutationResolver) CreateVideoTemplate(ctx context.Context, input models.VideoTemplateInput) (*models.VideoTemplateView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Templates().CreateVideoTemplate(ctx, id, input)
}

// UpdateVideoTemplate changes a video template (PATCH /api/video-templates).
func (r *mutationResolver) UpdateVideoTemplate(ctx context.Context, input models.VideoTemplatePatch) (*models.VideoTemplateView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Templates().UpdateVideoTemplate(ctx, id, input)
}

// UpsertTemplateHook stores a hook (POST /api/template-hooks).
func (r *mutationResolver) UpsertTemplateHook(ctx context.Context, input models.HookInput) (*TemplateHookUpsert, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	hook, created, err := r.svc.Accounts().UpsertHook(ctx, id, input)
	if err != nil {
		return nil, err
	}
	return &TemplateHookUpsert{Hook: hook, Created: created}, nil
}

// UpdateTemplateHook changes a hook (PATCH /api/template-hooks).
func (r *mutationResolver) UpdateTemplateHook(ctx context.Context, input models.HookPatch) (*models.HookView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return r.svc.Accounts().UpdateHook(ctx, id, input)
}

// DeleteTemplateHook deletes a hook (DELETE /api/template-hooks).
func (r *mutationResolver) DeleteTemplateHook(ctx context.Context, hookID string) (*DeletedTemplateHook, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.svc.Accounts().DeleteHook(ctx, id, hookID); err != nil {
		return nil, err
	}
	return &DeletedTemplateHook{ID: hookID}, nil
}

// The image-only columns of a template: null for copy templates.

// Ratio is the aspect ratio of an image template.
func (r *templateResolver) Ratio(_ context.Context, t *models.TemplateView) (*string, error) {
	if t.ImageColumns == nil {
		return nil, nil
	}
	return &t.ImageColumns.Ratio, nil
}

// SampleImages are the sample images of an image template.
func (r *templateResolver) SampleImages(_ context.Context, t *models.TemplateView) ([]string, error) {
	if t.ImageColumns == nil {
		return nil, nil
	}
	return t.ImageColumns.SampleImages, nil
}

// Domain is the domain label of an image template.
func (r *templateResolver) Domain(_ context.Context, t *models.TemplateView) (*string, error) {
	if t.ImageColumns == nil {
		return nil, nil
	}
	return &t.ImageColumns.Domain, nil
}

// Genre is the genre label of an image template.
func (r *templateResolver) Genre(_ context.Context, t *models.TemplateView) (*string, error) {
	if t.ImageColumns == nil {
		return nil, nil
	}
	return &t.ImageColumns.Genre, nil
}

// VariableLabels are the tenant's display names of an image template's variables.
func (r *templateResolver) VariableLabels(_ context.Context, t *models.TemplateView) (map[string]string, error) {
	if t.ImageColumns == nil {
		return nil, nil
	}
	return t.ImageColumns.VariableLabels, nil
}

// GenerationConfigs returns the configs of the core's view as members of the TemplateConfig union.
func (r *templateResolver) GenerationConfigs(_ context.Context, t *models.TemplateView) ([]TemplateConfig, error) {
	var out []TemplateConfig
	switch cfgs := t.GenerationConfigs.(type) {
	case []models.ImageConfigView:
		for i := range cfgs {
			out = append(out, &cfgs[i])
		}
	case []models.ArticleConfigView:
		for i := range cfgs {
			out = append(out, &cfgs[i])
		}
	}
	if out == nil {
		out = []TemplateConfig{}
	}
	return out, nil
}

// VariableLabels sets the variable labels of a template patch (present = replace them).
func (r *templatePatchResolver) VariableLabels(_ context.Context, p *models.TemplatePatch, labels map[string]string) error {
	p.VariableLabels = &labels
	return nil
}
