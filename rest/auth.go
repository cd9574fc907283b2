package rest

import "github.com/gorilla/mux"

// registerAuth adds the routes of registration, login and device authorization.
func (s *Server) registerAuth(api *mux.Router) {}
