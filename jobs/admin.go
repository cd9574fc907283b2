package jobs

import (
	"context"
	"encoding/json"

	"studio/models"
)

// RegisterAdmin adds the upstream administrator actions (upstream-list, -disable, -enable) to the dispatcher.
func RegisterAdmin(r *models.AdminActions, s *Service) {
	named := func(run func(ctx context.Context, name string) error) func(context.Context, json.RawMessage) (any, error) {
		return func(ctx context.Context, body json.RawMessage) (any, error) {
			var in struct {
				Name string `json:"name"`
			}
			if err := models.DecodeJSON(body, &in); err != nil {
				return nil, err
			}
			if in.Name == "" {
				return nil, models.Invalid("name is required: an upstream channel name from upstream-list")
			}
			if err := run(ctx, in.Name); err != nil {
				return nil, err
			}
			return map[string]any{"ok": true}, nil
		}
	}
	r.Register(models.AdminAction{Name: "upstream-list", Summary: "list upstreams with health score, state and reason",
		Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
			return map[string]any{"ok": true, "upstreams": s.Engine.List()}, nil
		}})
	r.Register(models.AdminAction{Name: "upstream-disable", Summary: "take an upstream out of rotation",
		Params: []models.AdminParam{{Name: "name", Type: "string", Usage: "channel name", Required: true}},
		Run: named(func(ctx context.Context, name string) error {
			return upstreamErr(s.Engine.Disable(ctx, name, "disabled by an administrator"))
		})})
	r.Register(models.AdminAction{Name: "upstream-enable", Summary: "put an upstream back into rotation",
		Params: []models.AdminParam{{Name: "name", Type: "string", Usage: "channel name", Required: true}},
		Run:    named(func(ctx context.Context, name string) error { return upstreamErr(s.Engine.Enable(ctx, name)) })})
}

func upstreamErr(err error) error {
	if err == nil {
		return nil
	}
	return &models.Error{Kind: models.KindNotFound, Message: "upstream not found", Err: err}
}
