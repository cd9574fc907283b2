package rest

import (
	"net/http"

	"github.com/gorilla/mux"

	"studio/models"
)

// The OpenAI-style paths (POST /api/chat/completions, GET /api/models, GET /api/models/{model}) are
// what an OpenAI client reaches with base URL {base_url}/api. They answer errors in OpenAI's shape,
// {"error": {"message", "type", "param", "code"}}, so that OpenAI SDKs raise their own error types with
// the message; `code` is the same stable code as in the rest of the API, or OpenAI's finer one where it
// has one (`model_not_found` for a model the relay does not serve), and `param` names the field at fault.

// openAIError is OpenAI's error body.
type openAIError struct {
	Error openAIErrorDetail `json:"error"`
}

type openAIErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// openAIType is OpenAI's error type for a status.
func openAIType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusPaymentRequired:
		return "insufficient_quota"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// writeOpenAIError answers err in OpenAI's error shape, with the status and code of its kind.
func writeOpenAIError(w http.ResponseWriter, r *http.Request, err error) {
	e, status, code := answerOf(w, r, err)
	detail := openAIErrorDetail{Message: e.Error(), Type: openAIType(status), Code: code}
	if e.Reason != "" {
		detail.Code = e.Reason
	}
	if e.Param != "" {
		detail.Param = &e.Param
	}
	writeJSON(w, status, openAIError{Error: detail})
}

// openAI wraps an OpenAI-style endpoint: like authed, with errors in OpenAI's shape.
func (s *Server) openAI(h handler) http.HandlerFunc {
	return s.guard(writeOpenAIError, h)
}

// modelCreated is the `created` time of the listed models (OpenAI's model object requires one): the
// day the relay began listing them.
const modelCreated = 1764028800 // 2025-11-25T00:00:00Z

// openAIModel is OpenAI's model object.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func newOpenAIModel(id string) openAIModel {
	return openAIModel{ID: id, Object: "model", Created: modelCreated, OwnedBy: "studio"}
}

// registerOpenAIModels adds GET /api/models and GET /api/models/{model}.
func (s *Server) registerOpenAIModels(api *mux.Router) {
	api.HandleFunc("/models", s.openAI(s.listModels)).Methods(http.MethodGet)
	api.HandleFunc("/models/{model}", s.openAI(s.retrieveModel)).Methods(http.MethodGet)
}

// listModels answers OpenAI's model list: service-auto and the chat families it routes over.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	names, err := s.svc.Copy().ChatModels(id)
	if err != nil {
		return err
	}
	data := make([]openAIModel, len(names))
	for i, n := range names {
		data[i] = newOpenAIModel(n)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	return nil
}

// retrieveModel answers one model of the list, 404 for any other name.
func (s *Server) retrieveModel(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	want := mux.Vars(r)["model"]
	names, err := s.svc.Copy().ChatModels(id)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == want {
			writeJSON(w, http.StatusOK, newOpenAIModel(n))
			return nil
		}
	}
	return &models.Error{Kind: models.KindNotFound, Message: "model " + want + " not found (GET /api/models lists the models)",
		Param: "model", Reason: models.ReasonModelNotFound}
}
