package rest

import "github.com/gorilla/mux"

// registerTemplates adds the routes of templates, skills, video templates and pipeline hooks.
func (s *Server) registerTemplates(api *mux.Router) {}
