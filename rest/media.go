package rest

import "github.com/gorilla/mux"

// registerMedia adds the routes of copy, image reading and the model catalogue (chat: Register).
func (s *Server) registerMedia(api *mux.Router) {
	s.registerArticle(api)
	s.registerReverse(api)
	s.registerModels(api)
	s.registerOpenAIModels(api)
}
