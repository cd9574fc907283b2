package jobs

import (
	"context"

	"studio/jobs/internal/calls"
	"studio/jobs/upstream"
	"studio/models"
)

// WriteArticle answers POST /api/article (spec 4.6, D8): the template's recipe becomes prompts
// (models.PrepareArticle), a chat upstream chosen by routing writes the copy as a JSON object, and an
// answer that models.ParseArticle cannot read counts as that upstream's failure, so the next upstream
// of the chain is tried. Copy is free of credits and counted in usage as copy (the chat column).
func (s *Service) WriteArticle(ctx context.Context, id *models.Identity, req models.ArticleRequest) (*models.Article, error) {
	p, err := s.App.PrepareArticle(ctx, id, req)
	if err != nil {
		return nil, err
	}
	msgs := []upstream.Message{{Role: "system", Content: p.System}, {Role: "user", Content: p.User}}
	var art *models.Article
	err = s.Engine.Run(ctx, calls.ChatRoute, nil, func(ctx context.Context, u *upstream.Upstream) error {
		res, err := u.Chat().Chat(ctx, upstream.ChatRequest{Messages: msgs, JSON: true})
		if err != nil {
			return err
		}
		a, err := models.ParseArticle(p.Format, res.Content)
		if err != nil {
			return &upstream.Error{Class: upstream.ClassOther, Upstream: u.Name, Code: "bad_answer", Message: "unusable copy", Err: err}
		}
		art = a
		return nil
	})
	if err != nil {
		return nil, calls.Error(ctx, err, "copy generation")
	}
	s.App.RecordUsage(id.TenantID, models.ServiceCopy, id.Agent)
	return art, nil
}
