package jobs

import (
	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
)

// ModelCatalogue returns the answer of GET /api/available-models for a media type (image, the default,
// or video): channels and families with their capabilities, or tiers, each marked available when an
// upstream in rotation serves it. Provider names are left out.
func (s *Service) ModelCatalogue(id *models.Identity, mediaType string) (any, error) {
	if err := id.Require(models.CapListModels); err != nil {
		return nil, err
	}
	mt, err := models.CatalogueMedia(mediaType)
	if err != nil {
		return nil, err
	}
	active := map[string]bool{}
	for _, st := range s.Engine.List() {
		active[st.Name] = st.State == routing.StateActive
	}
	set := s.Engine.Registry().Current()
	if mt == models.CatalogueVideo {
		tiers := map[string]bool{}
		for _, u := range set.All {
			if u.Media == upstream.MediaVideo && active[u.Name] {
				for _, t := range u.Tiers {
					tiers[t] = true
				}
			}
		}
		return models.NewVideoModels(tiers), nil
	}
	var channels []models.ModelChannel
	for _, u := range set.All {
		if u.Media != upstream.MediaImage {
			continue
		}
		caps := make([]string, len(u.Capabilities))
		for i, c := range u.Capabilities {
			caps[i] = string(c)
		}
		channels = append(channels, models.ModelChannel{Name: u.Name, Family: u.Family, Capabilities: caps, Available: active[u.Name]})
	}
	return models.NewImageModels(channels), nil
}
