package rest

import "github.com/gorilla/mux"

// registerUploads adds the routes of uploads and direct-upload presign/commit.
func (s *Server) registerUploads(api *mux.Router) {}
