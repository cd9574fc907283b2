package rest

import (
	"net/http"

	"studio/models"
)

// admin dispatches POST /api/admin {action, ...} to the core's administrator actions.
func (s *Server) admin(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	body, err := readBody(r, maxJSONBody)
	if err != nil {
		return err
	}
	out, err := s.app.Admin.Run(r.Context(), body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
