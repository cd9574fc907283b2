package jobs

import (
	"context"
	"encoding/json"
	"strings"

	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/media"
)

// readInstruction asks an image-reading upstream for the parts of a template.
const readInstruction = `Describe this picture as a reusable image template. Answer with one JSON object:
{"zh_name": "short Chinese name", "description": "one line", "prompt": "a complete prompt that recreates the picture without its text",
 "ratio": "W:H", "genre": "category", "placeholders": ["title", "subtitle", ...]}
"placeholders" lists, in reading order, the roles of the text in the picture, using only these names:
title, subtitle, subject, date, location, watermark, body, cta, style.`

// runImageToTemplate runs the three steps of an image-to-template job.
func (s *Service) runImageToTemplate(ctx context.Context, j *models.Job, p models.ImageParams) error {
	img, err := s.fetchImage(ctx, p.SourceImage)
	if err != nil {
		return s.App.Jobs().FailJob(ctx, j.ID, "image_url could not be read ("+err.Error()+"); credits refunded")
	}
	kind, err := media.Detect(img)
	if err != nil {
		return s.App.Jobs().FailJob(ctx, j.ID, "image_url is not a supported picture; credits refunded")
	}
	var text string
	err = s.Engine.Run(ctx, routing.Request{Media: upstream.MediaChat, Needs: []upstream.Capability{upstream.CapVision}}, func(note string) {
		_ = s.App.Jobs().SetJobProgress(context.WithoutCancel(ctx), j.ID, note)
	}, func(ctx context.Context, u *upstream.Upstream) error {
		out, err := u.Chat().ReadImage(ctx, upstream.ReadImageRequest{Image: img, MIME: kind.MIME, Instruction: readInstruction})
		text = out
		return err
	})
	if err != nil {
		return s.failGeneration(ctx, j, err)
	}
	if err := s.App.Jobs().SetJobStep(ctx, j.ID, 1); err != nil {
		return err
	}
	var got struct {
		ZhName       string   `json:"zh_name"`
		Description  string   `json:"description"`
		Prompt       string   `json:"prompt"`
		Ratio        string   `json:"ratio"`
		AspectRatio  string   `json:"aspect_ratio"`
		Genre        string   `json:"genre"`
		Placeholders []string `json:"placeholders"`
	}
	if err := json.Unmarshal([]byte(extractJSON(text)), &got); err != nil || strings.TrimSpace(got.Prompt) == "" {
		return s.App.Jobs().FailJob(ctx, j.ID, "the picture could not be turned into a template (unreadable description); credits refunded")
	}
	if got.Ratio == "" {
		got.Ratio = got.AspectRatio
	}
	if err := s.App.Jobs().SetJobStep(ctx, j.ID, 2); err != nil {
		return err
	}
	return s.App.Jobs().CompleteImageToTemplate(context.WithoutCancel(ctx), j.ID, models.TemplateDraft{ZhName: got.ZhName,
		Description: got.Description, Prompt: got.Prompt, Ratio: got.Ratio, Genre: got.Genre, Roles: got.Placeholders})
}

// extractJSON returns the outermost JSON object of a model's answer (which may wrap it in prose or fences).
func extractJSON(s string) string {
	i, j := strings.Index(s, "{"), strings.LastIndex(s, "}")
	if i < 0 || j < i {
		return s
	}
	return s[i : j+1]
}
