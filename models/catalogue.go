package models

import (
	"slices"
	"strings"

	"studio/models/contract"
)

// The model catalogue (GET /api/available-models, spec 4.15). Image callers may name `auto`, a model
// family (its channels rotate) or a channel (locks one upstream); channel names are public routing
// targets (spec 1.9), provider names never appear. Video callers name `auto` or a tier code. The
// routing side (jobs) supplies which channels and tiers are in rotation now.

// Media types of the catalogue.
const (
	CatalogueImage = "image"
	CatalogueVideo = "video"
)

// CatalogueMedia checks the media_type of a catalogue request: empty means image.
func CatalogueMedia(mediaType string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(mediaType)) {
	case "", CatalogueImage:
		return CatalogueImage, nil
	case CatalogueVideo:
		return CatalogueVideo, nil
	}
	return "", Invalid("media_type must be image (the default) or video, not %q", mediaType)
}

// ModelChannel is one image channel as callers see it.
type ModelChannel struct {
	Name         string   `json:"name"`
	Family       string   `json:"family"`
	Capabilities []string `json:"capabilities"`
	// Available is false while the channel is out of rotation (disabled, or removed until a probe succeeds).
	Available bool `json:"available"`
}

// ModelFamily is one image model family: its channels and what at least one of its channels in
// rotation can do.
type ModelFamily struct {
	Name         string   `json:"name"`
	Capabilities []string `json:"capabilities"`
	Channels     []string `json:"channels"`
	Available    bool     `json:"available"`
}

// ImageModels is the answer of GET /api/available-models for images.
type ImageModels struct {
	MediaType string         `json:"media_type"`
	Default   string         `json:"default"`
	Families  []ModelFamily  `json:"families"`
	Channels  []ModelChannel `json:"channels"`
}

// NewImageModels builds the image catalogue from the configured image channels, ordered by name.
func NewImageModels(channels []ModelChannel) *ImageModels {
	out := &ImageModels{MediaType: CatalogueImage, Default: contract.ModelAuto,
		Families: []ModelFamily{}, Channels: make([]ModelChannel, 0, len(channels))}
	byFamily := map[string]*ModelFamily{}
	for _, c := range channels {
		c.Capabilities = sortedStrings(c.Capabilities)
		out.Channels = append(out.Channels, c)
		f := byFamily[c.Family]
		if f == nil {
			f = &ModelFamily{Name: c.Family, Capabilities: []string{}, Channels: []string{}}
			byFamily[c.Family] = f
		}
		f.Channels = append(f.Channels, c.Name)
		if c.Available {
			f.Available = true
			f.Capabilities = sortedStrings(append(f.Capabilities, c.Capabilities...))
		}
	}
	slices.SortFunc(out.Channels, func(a, b ModelChannel) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range byFamily {
		slices.Sort(f.Channels)
		out.Families = append(out.Families, *f)
	}
	slices.SortFunc(out.Families, func(a, b ModelFamily) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// VideoTierView is one video tier of the catalogue: duration bounds in seconds and resolutions with
// their credits per second.
type VideoTierView struct {
	Code              string                    `json:"code"`
	Name              string                    `json:"name"`
	MinDuration       int                       `json:"min_duration"`
	MaxDuration       int                       `json:"max_duration"`
	Resolutions       []contract.ResolutionCost `json:"resolutions"`
	DefaultResolution string                    `json:"default_resolution"`
	// Available is false while no upstream in rotation serves the tier.
	Available bool `json:"available"`
}

// VideoModels is the answer of GET /api/available-models?media_type=video.
type VideoModels struct {
	MediaType string          `json:"media_type"`
	Default   string          `json:"default"`
	Tiers     []VideoTierView `json:"tiers"`
}

// NewVideoModels lists the tiers of spec 4.5 in their published order; available names the tier codes
// some upstream in rotation serves.
func NewVideoModels(available map[string]bool) *VideoModels {
	out := &VideoModels{MediaType: CatalogueVideo, Default: contract.ModelAuto}
	for _, t := range contract.Tiers() {
		v := VideoTierView{Code: t.Code, Name: t.Name, MinDuration: t.MinDuration, MaxDuration: t.MaxDuration,
			DefaultResolution: t.DefaultResolution(), Available: available[t.Code]}
		for _, r := range t.Resolutions {
			perSecond, err := contract.VideoCostPerSecond(r)
			if err != nil {
				continue
			}
			v.Resolutions = append(v.Resolutions, contract.ResolutionCost{Resolution: r, Credits: perSecond})
		}
		out.Tiers = append(out.Tiers, v)
	}
	return out
}

// sortedStrings returns the distinct strings of list, sorted; never nil.
func sortedStrings(list []string) []string {
	out := slices.Clone(list)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// ModelCatalogue returns the answer of GET /api/available-models for a media type (image, the default,
// or video): channels and families with their capabilities, or tiers, each marked available when an
// upstream in rotation serves it. Provider names are left out.
func (cs *CopyService) ModelCatalogue(id *Identity, mediaType string) (any, error) {
	if err := id.Require(CapListModels); err != nil {
		return nil, err
	}
	mt, err := CatalogueMedia(mediaType)
	if err != nil {
		return nil, err
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	channels, tiers := r.Catalogue()
	if mt == CatalogueVideo {
		return NewVideoModels(tiers), nil
	}
	return NewImageModels(channels), nil
}
