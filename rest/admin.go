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
	out, err := s.svc.Admin.Run(r.Context(), id, body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
