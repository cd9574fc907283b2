package rest

import "github.com/gorilla/mux"

// registerMedia adds the routes of copy, image reading, chat and the model catalogue.
func (s *Server) registerMedia(api *mux.Router) {
	s.registerArticle(api)
	s.registerReverse(api)
	s.registerChat(api)
	s.registerModels(api)
	s.registerOpenAIModels(api)
}
