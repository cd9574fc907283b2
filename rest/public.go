package rest

import (
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"studio/models"
	"studio/models/contract"
)

// health answers liveness with the database's reachability; 503 when it does not answer.
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.svc.Ping(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "database": "unreachable", "error": "database unreachable", "code": models.KindUnavailable.String()})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "database": "ok", "time": s.svc.Now().Format(time.RFC3339)})
	return nil
}

func (s *Server) cliGuide(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.opts.CLIGuide)
	return nil
}

func (s *Server) docContracts(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, contract.Document())
	return nil
}

//go:embed openapi.yaml
var openapiYAML []byte

var openapiDoc = sync.OnceValues(func() (*openapi3.T, error) {
	return openapi3.NewLoader().LoadFromData(openapiYAML)
})

// OpenAPI returns the parsed OpenAPI document of the REST surface.
func OpenAPI() (*openapi3.T, error) { return openapiDoc() }

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	doc, err := OpenAPI()
	if err != nil {
		return models.Internal("openapi: load", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return models.Internal("openapi: encode", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
	return nil
}
