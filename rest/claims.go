package rest

import (
	"net/http"

	"github.com/gorilla/mux"

	"studio/models"
)

// registerClaims adds the routes of claim codes: tenant creation, public preview and redemption, buyer claims.
// The administrator's void is the admin action promo-claim-disable (models.registerClaimAdmin). The
// per-address limits of the public preview and redemption are the core's (models.ClaimRedeemsPerAddress),
// counted in the database for every surface and replica.
func (s *Server) registerClaims(api *mux.Router) {
	api.HandleFunc("/tenant-claims", s.authed(s.idempotent("tenant-claims", s.createClaim, nil))).Methods(http.MethodPost)
	api.HandleFunc("/promo-claims", s.public(s.previewClaim)).Methods(http.MethodGet)
	api.HandleFunc("/promo-claims", s.public(s.redeemClaim)).Methods(http.MethodPost)
	api.HandleFunc("/claims", s.authed(s.userClaims)).Methods(http.MethodGet)
}

func (s *Server) createClaim(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var in models.ClaimInput
	if err := decode(r, &in); err != nil {
		return err
	}
	out, err := s.svc.Claims().CreateClaimCode(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeOK(w, out)
	return nil
}

func (s *Server) previewClaim(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Claims().PreviewClaim(r.Context(), r.URL.Query().Get("code"), clientAddr(r))
	if err != nil {
		return err
	}
	writeOK(w, out)
	return nil
}

func (s *Server) redeemClaim(w http.ResponseWriter, r *http.Request) error {
	var in models.RedeemInput
	if err := decode(r, &in); err != nil {
		return err
	}
	out, err := s.svc.Claims().RedeemClaim(r.Context(), in, clientAddr(r))
	if err != nil {
		return err
	}
	writeOK(w, out)
	return nil
}

func (s *Server) userClaims(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	out, err := s.svc.Claims().UserClaims(r.Context(), id)
	if err != nil {
		return err
	}
	writeOK(w, out)
	return nil
}
