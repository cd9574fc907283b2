package rest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"studio/models"
)

// bufferedWriter keeps a copy of a response so that it can be stored for Idempotency-Key replays.
type bufferedWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *bufferedWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *bufferedWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

// idempotent makes a creating endpoint safe to retry: a repeat with the same Idempotency-Key and body
// within 24 h returns the first response and changes nothing; the same key with another body is 422.
// applies decides from the body whether the request is one that creates (e.g. action=create).
func (s *Server) idempotent(route string, h handler, applies func(body []byte) bool) handler {
	return func(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			return h(w, r, id)
		}
		body, err := readBody(r, maxJSONBody)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if applies != nil && !applies(body) {
			return h(w, r, id)
		}
		replay, err := s.svc.Jobs().BeginIdempotent(r.Context(), id, route, key, body)
		if err != nil {
			return err
		}
		if replay != nil {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(replay.Status)
			_, _ = w.Write(replay.Body)
			return nil
		}
		bw := &bufferedWriter{ResponseWriter: w}
		herr := h(bw, r, id)
		status := bw.status
		if herr != nil {
			status = http.StatusInternalServerError
		}
		s.svc.Jobs().FinishIdempotent(r.Context(), id, route, key, status, bw.buf.Bytes())
		return herr
	}
}

// isCreateAction reports whether a POST /api/tenant-accounts body is the `create` action, the only one
// that Idempotency-Key applies to (the others are absolute settings, safe to repeat).
func isCreateAction(body []byte) bool {
	var head struct {
		Action string `json:"action"`
	}
	return json.Unmarshal(body, &head) == nil && head.Action == "create"
}
