package rest

import (
	"net/http"

	"github.com/gorilla/mux"

	"studio/models"
)

// registerModels adds GET /api/available-models (spec 4.15): any authenticated identity.
func (s *Server) registerModels(api *mux.Router) {
	api.HandleFunc("/available-models", s.authed(s.availableModels)).Methods(http.MethodGet)
}

func (s *Server) availableModels(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	catalogue, err := s.svc.Copy().ModelCatalogue(id, r.URL.Query().Get("media_type"))
	if err != nil {
		return err
	}
	writeOK(w, catalogue)
	return nil
}
