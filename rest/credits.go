package rest

import (
	"net/http"

	"studio/models"
)

func (s *Server) balance(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	v, err := s.app.Balance(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) tenantPool(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	v, err := s.app.Pool(r.Context(), id.TenantID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
