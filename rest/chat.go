package rest

import (
	"net/http"

	"github.com/gorilla/mux"

	"studio/models"
)

// maxChatBody bounds a chat request body: long conversations and pictures sent as data URLs fit.
const maxChatBody = 16 << 20

// registerChat adds the chat relay and the agent proxy (spec 4.15).
func (s *Server) registerChat(api *mux.Router) {
	api.HandleFunc("/chat/completions", s.openAI(s.chatCompletions)).Methods(http.MethodPost)
	api.HandleFunc("/chat", s.authed(s.agentChat)).Methods(http.MethodPost)
}

// chatCompletions relays an OpenAI chat completions request; the answer (JSON or server-sent events)
// is written by the relay.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	body, err := readBody(r, maxChatBody)
	if err != nil {
		return err
	}
	return s.svc.Copy().RelayChat(r.Context(), id, body, w)
}

func (s *Server) agentChat(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var req models.AgentRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	reply, err := s.svc.Copy().AgentChat(r.Context(), id, req)
	if err != nil {
		return err
	}
	writeOK(w, reply)
	return nil
}
