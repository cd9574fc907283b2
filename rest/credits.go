package rest

import (
	"net/http"

	"github.com/gorilla/mux"

	"studio/models"
)

// registerCredits adds balance, pool, stats, usage and member accounts.
func (s *Server) registerCredits(api *mux.Router) {
	api.HandleFunc("/balance", s.authed(s.balance, models.IdentityTenant, models.IdentityAccount, models.IdentityUser)).Methods(http.MethodGet)
	api.HandleFunc("/tenant-pool", s.authed(s.tenantPool, models.IdentityTenant)).Methods(http.MethodGet)
}

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
