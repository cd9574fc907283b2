package graph

import (
	"context"
	"errors"

	"studio/models"
)

// errUnknownCatalogue is a catalogue of a type the schema does not describe.
var errUnknownCatalogue = errors.New("unknown catalogue type")

// AvailableModels answers the model catalogue (GET /api/available-models).
func (r *queryResolver) AvailableModels(ctx context.Context, mediaType *string) (ModelCatalogue, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	catalogue, err := r.svc.Copy().ModelCatalogue(id, deref(mediaType))
	if err != nil {
		return nil, err
	}
	switch catalogue.(type) {
	case *models.ImageModels, *models.VideoModels:
		return catalogue, nil
	}
	return nil, models.Internal("graph: model catalogue", errUnknownCatalogue)
}
