package rest

import (
	"context"
	"net/http"
	"time"

	"studio/models"
)

// adminOnly wraps the metrics handler (not a core operation) so that only an identity that may
// administer the platform reaches it.
func (s *Server) adminOnly(h http.Handler) http.HandlerFunc {
	return s.authed(func(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
		if err := id.Require(models.CapAdminister); err != nil {
			return err
		}
		h.ServeHTTP(w, r)
		return nil
	})
}

// ready answers readiness: the database answers and this process's workers run, and it is not stopping
// (from SIGTERM on it answers 503 at once while it finishes its requests: jobs.Service.Drain).
func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	workers := s.svc.Workers()
	body := map[string]any{"ok": true, "database": "ok", "workers": workers}
	status := http.StatusOK
	if err := s.svc.Ping(ctx); err != nil {
		body["ok"], body["database"], status = false, "unreachable", http.StatusServiceUnavailable
	}
	if workers != models.WorkersRunning {
		body["ok"], status = false, http.StatusServiceUnavailable
	}
	if status != http.StatusOK {
		body["error"], body["code"] = "not ready", models.KindUnavailable.String()
		if workers == models.WorkersDraining {
			body["error"] = "not ready: this replica is shutting down; send requests to another replica"
		}
	}
	writeJSON(w, status, body)
	return nil
}
