package rest

import "github.com/gorilla/mux"

// registerJobs adds the routes of image generation, batches and jobs.
func (s *Server) registerJobs(api *mux.Router) {}
