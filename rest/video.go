package rest

import (
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"studio/models"
)

// registerVideo adds the routes of video tasks (spec 4.5, D7): submit, one task or a page, and cancel.
func (s *Server) registerVideo(api *mux.Router) {
	api.HandleFunc("/videos", s.authed(s.idempotent("videos", s.submitVideo, nil))).Methods(http.MethodPost)
	api.HandleFunc("/videos", s.authed(s.videos)).Methods(http.MethodGet)
	api.HandleFunc("/videos", s.authed(s.cancelVideo)).Methods(http.MethodDelete)
}

func (s *Server) submitVideo(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var req models.VideoRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	t, err := s.svc.Videos().SubmitVideo(r.Context(), id, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "id": t.ID, "status": t.Status, "model": t.Model,
		"resolution": t.Resolution, "duration": t.Duration, "credits": t.Credits})
	return nil
}

func (s *Server) videos(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	q := r.URL.Query()
	if taskID := q.Get("id"); taskID != "" {
		t, err := s.svc.Videos().VideoTaskFor(r.Context(), id, taskID)
		if err != nil {
			return err
		}
		writeOK(w, t.View())
		return nil
	}
	pageNum, err := videoQueryInt(q.Get("page_num"), "page_num", 1)
	if err != nil {
		return err
	}
	pageSize, err := videoQueryInt(q.Get("page_size"), "page_size", models.VideoPageSizeDefault)
	if err != nil {
		return err
	}
	page, err := s.svc.Videos().VideoTasks(r.Context(), id, q.Get("filter.status"), pageNum, pageSize)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "items": page.Items, "total": page.Total,
		"page_num": page.PageNum, "page_size": page.PageSize})
	return nil
}

func (s *Server) cancelVideo(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	t, err := s.svc.Videos().CancelVideo(r.Context(), id, r.URL.Query().Get("id"))
	if err != nil {
		return err
	}
	writeOK(w, t.View())
	return nil
}

// videoQueryInt parses an optional integer query parameter; absent means def.
func videoQueryInt(raw, name string, def int) (int, error) {
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return 0, models.Invalid("%s must be an integer", name)
	}
	return n, nil
}
