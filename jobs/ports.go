package jobs

import (
	"context"
	"net/http"

	"studio/jobs/internal/calls"
	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/media"
)

// router is the core's models.Router: the routing engine, the upstreams and the chat relay, behind the
// use cases the core owns (models.JobService.SubmitImages, models.CopyService.WriteArticle...).
type router struct{ s *Service }

var _ models.Router = router{}

// readingRoute routes image readings: chat upstreams that accept pictures.
var readingRoute = routing.Request{Media: upstream.MediaChat, Needs: []upstream.Capability{upstream.CapVision}}

func (r router) PlanChat(vision bool) error {
	req := calls.ChatRoute
	if vision {
		req = readingRoute
	}
	_, err := r.s.Engine.Plan(req)
	return calls.RouteError(err)
}

// badAnswer makes an answer the caller could not use count as that upstream's failure.
func badAnswer(u *upstream.Upstream, err error) error {
	return &upstream.Error{Class: upstream.ClassOther, Upstream: u.Name, Code: "bad_answer", Message: "unusable answer", Err: err}
}

func (r router) Chat(ctx context.Context, what string, msgs []models.ChatMessage, json bool, accept func(string) error) error {
	conv := make([]upstream.Message, len(msgs))
	for i, m := range msgs {
		conv[i] = upstream.Message{Role: m.Role, Content: m.Content}
	}
	err := r.s.Engine.Run(ctx, calls.ChatRoute, nil, func(ctx context.Context, u *upstream.Upstream) error {
		res, err := u.Chat().Chat(ctx, upstream.ChatRequest{Messages: conv, JSON: json})
		if err != nil {
			return err
		}
		if err := accept(res.Content); err != nil {
			return badAnswer(u, err)
		}
		return nil
	})
	if err != nil {
		return calls.Error(ctx, err, what)
	}
	return nil
}

func (r router) ReadPicture(ctx context.Context, what string, img []byte, mime, instruction string, accept func(string) error) error {
	err := r.s.Engine.Run(ctx, readingRoute, nil, func(ctx context.Context, u *upstream.Upstream) error {
		answer, err := u.Chat().ReadImage(ctx, upstream.ReadImageRequest{Image: img, MIME: mime, Instruction: instruction})
		if err != nil {
			return err
		}
		if err := accept(answer); err != nil {
			return badAnswer(u, err)
		}
		return nil
	})
	if err != nil {
		return calls.Error(ctx, err, what)
	}
	return nil
}

// FetchPicture reads the picture of an image_url: from the media store when the URL is this service's,
// otherwise over the safe client.
func (r router) FetchPicture(ctx context.Context, rawURL string) ([]byte, string, error) {
	s := r.s
	if key, ok := s.media.KeyFromURL(rawURL); ok {
		rc, _, err := s.media.Open(ctx, key)
		if err != nil {
			return nil, "", models.ReadingImageError("image_url", err, false)
		}
		defer rc.Close()
		data, kind, err := media.ReadAll(rc, media.DetectImageForReading)
		if err != nil {
			return nil, "", models.ReadingImageError("image_url", err, false)
		}
		return data, kind.MIME, nil
	}
	if err := s.App.Jobs().CheckMediaURL(ctx, rawURL); err != nil {
		return nil, "", &models.Error{Kind: models.KindInvalid, Message: "image_url " + err.Error(), Err: err}
	}
	data, _, err := media.Fetch(ctx, s.client, rawURL, media.MaxReadingImageSize)
	if err != nil {
		return nil, "", models.ReadingImageError("image_url", err, false)
	}
	kind, err := media.DetectImageForReading(data)
	if err != nil {
		return nil, "", models.ReadingImageError("image_url", err, false)
	}
	return data, kind.MIME, nil
}

func (r router) CancelUpstream(ctx context.Context, taskID, name, upstreamTaskID string) {
	r.s.cancelTask(ctx, taskID, name, upstream.MediaVideo, upstreamTaskID)
}

func (r router) Catalogue() ([]models.ModelChannel, map[string]bool) {
	active := map[string]bool{}
	for _, st := range r.s.Engine.List() {
		active[st.Name] = st.State == routing.StateActive
	}
	tiers := map[string]bool{}
	var channels []models.ModelChannel
	for _, u := range r.s.Engine.Registry().Current().All {
		switch u.Media {
		case upstream.MediaVideo:
			if active[u.Name] {
				for _, t := range u.Tiers {
					tiers[t] = true
				}
			}
		case upstream.MediaImage:
			caps := make([]string, len(u.Capabilities))
			for i, c := range u.Capabilities {
				caps[i] = string(c)
			}
			channels = append(channels, models.ModelChannel{Name: u.Name, Family: u.Family, Capabilities: caps, Available: active[u.Name]})
		}
	}
	return channels, tiers
}

func (r router) Relay(ctx context.Context, id *models.Identity, body []byte, w http.ResponseWriter) error {
	return r.s.relay.Completions(ctx, id, body, w)
}

func (r router) ChatModels() []string { return r.s.relay.Models() }
