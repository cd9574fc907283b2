package rest

import (
	"net/http"

	"github.com/gorilla/mux"

	"studio/models"
)

// registerArticle adds POST /api/article (copy generation, spec 4.6).
func (s *Server) registerArticle(api *mux.Router) {
	api.HandleFunc("/article", s.authed(s.article)).Methods(http.MethodPost)
}

func (s *Server) article(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var req models.ArticleRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	art, err := s.svc.Copy().WriteArticle(r.Context(), id, req)
	if err != nil {
		return err
	}
	writeOK(w, art)
	return nil
}
