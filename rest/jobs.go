package rest

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"studio/models"
)

// registerJobs adds the routes of image generation, batches and jobs.
func (s *Server) registerJobs(api *mux.Router) {
	api.HandleFunc("/generate", s.authed(s.idempotent("generate", s.generate, nil))).Methods(http.MethodPost)
	api.HandleFunc("/generate-batch", s.authed(s.idempotent("generate-batch", s.generateBatch, nil))).Methods(http.MethodPost)
	api.HandleFunc("/jobs", s.authed(s.jobs)).Methods(http.MethodGet)
	api.HandleFunc("/image-to-template", s.authed(s.imageToTemplate)).Methods(http.MethodPost)
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var req models.GenerateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	jobs, err := s.svc.Jobs().SubmitImages(r.Context(), id, []models.GenerateRequest{req})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "jobId": jobs[0].ID, "status": jobs[0].Status})
	return nil
}

func (s *Server) generateBatch(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var req struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Items == nil {
		return models.Invalid("items is required: an array of generate requests")
	}
	if len(req.Items) > models.MaxBatch {
		return models.Invalid("a batch holds at most %d items, got %d", models.MaxBatch, len(req.Items))
	}
	items := make([]models.GenerateRequest, len(req.Items))
	for i, raw := range req.Items {
		if err := models.DecodeJSON(raw, &items[i]); err != nil {
			return models.Invalid("items[%d]: %s", i, err.Error())
		}
	}
	jobs, err := s.svc.Jobs().SubmitImages(r.Context(), id, items)
	if err != nil {
		return err
	}
	out := make([]map[string]string, len(jobs))
	for i, j := range jobs {
		out[i] = map[string]string{"jobId": j.ID, "status": string(j.Status)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "jobs": out})
	return nil
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	q := r.URL.Query()
	if jobID := q.Get("id"); jobID != "" {
		j, err := s.svc.Jobs().JobFor(r.Context(), id, jobID)
		if err != nil {
			return err
		}
		writeOK(w, j.View())
		return nil
	}
	var given *int
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			n = 0 // not a number: refused like any other size that is not positive
		}
		given = &n
	}
	limit, err := models.JobsPageSize("limit", given)
	if err != nil {
		return err
	}
	page, err := s.svc.Jobs().Jobs(r.Context(), id, q.Get("status"), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	var next *string
	if page.NextCursor != "" {
		next = &page.NextCursor
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "jobs": page.Jobs, "next_cursor": next})
	return nil
}

func (s *Server) imageToTemplate(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var req models.ImageToTemplateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	j, err := s.svc.Jobs().SubmitImageToTemplate(r.Context(), id, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "jobId": j.ID, "status": j.Status})
	return nil
}
