package rest

import "github.com/gorilla/mux"

// registerMedia adds the routes of video tasks, copy, image reading, chat and models.
func (s *Server) registerMedia(api *mux.Router) {}
