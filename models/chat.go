// Chat: the agent chat of POST /api/chat, the OpenAI-compatible relay and its model list, answered
// through the Router port while the caller waits.

package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
)

// ChatMessage is one message of a conversation.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// AgentRequest is the body of POST /api/chat (D8): a conversation in messages, or one message.
type AgentRequest struct {
	Messages []ChatMessage `json:"messages"`
	// Message is one user message: a string, or an object with role and content.
	Message json.RawMessage `json:"message"`
}

// AgentReply is the answer of POST /api/chat.
type AgentReply struct {
	Message ChatMessage `json:"message"`
}

// chatRoles are the roles a caller's message may have.
var chatRoles = []string{"system", "developer", "user", "assistant"}

// conversation validates the request and returns the conversation to send.
func (req AgentRequest) conversation() ([]ChatMessage, error) {
	hasOne := len(bytes.TrimSpace(req.Message)) > 0 && string(bytes.TrimSpace(req.Message)) != "null"
	switch {
	case req.Messages != nil && hasOne:
		return nil, Invalid("send either messages or message, not both")
	case hasOne:
		var text string
		if json.Unmarshal(req.Message, &text) == nil {
			req.Messages = []ChatMessage{{Role: "user", Content: text}}
			break
		}
		var m ChatMessage
		if err := json.Unmarshal(req.Message, &m); err != nil {
			return nil, Invalid("message must be a string or an object with role and content")
		}
		if m.Role == "" {
			m.Role = "user"
		}
		req.Messages = []ChatMessage{m}
	case len(req.Messages) == 0:
		return nil, Invalid("messages is required: an array of {role, content}, or send message with one text")
	}
	for i, m := range req.Messages {
		if !slices.Contains(chatRoles, m.Role) {
			return nil, Invalid("messages[%d].role must be one of %s", i, strings.Join(chatRoles, ", "))
		}
		if strings.TrimSpace(m.Content) == "" {
			return nil, Invalid("messages[%d].content must be non-empty text", i)
		}
	}
	return req.Messages, nil
}

// errEmptyAnswer refuses an empty chat answer (that upstream failed; the next one is asked).
var errEmptyAnswer = errors.New("the answer was empty")

// AgentChat answers POST /api/chat: one completion routed like the relay, free of credits and counted
// in usage with the caller's X-CS-Agent as the agent.
func (cs *CopyService) AgentChat(ctx context.Context, id *Identity, req AgentRequest) (*AgentReply, error) {
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	msgs, err := req.conversation()
	if err != nil {
		return nil, err
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	var answer string
	err = r.Chat(ctx, "chat", msgs, false, func(got string) error {
		if strings.TrimSpace(got) == "" {
			return errEmptyAnswer
		}
		answer = got
		return nil
	})
	if err != nil {
		return nil, err
	}
	cs.a.Credits().RecordUsage(id.TenantID, ServiceChat, id.Agent)
	return &AgentReply{Message: ChatMessage{Role: "assistant", Content: answer}}, nil
}

// RelayChat answers an OpenAI chat/completions body through the relay (POST /v1/chat/completions).
func (cs *CopyService) RelayChat(ctx context.Context, id *Identity, body []byte, w http.ResponseWriter) error {
	if err := id.Require(CapGenerate); err != nil {
		return err
	}
	r, err := cs.a.router()
	if err != nil {
		return err
	}
	return r.Relay(ctx, id, body, w)
}

// ChatModels lists the models of GET /api/models.
func (cs *CopyService) ChatModels(id *Identity) ([]string, error) {
	if err := id.Require(CapListModels); err != nil {
		return nil, err
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	return r.ChatModels(), nil
}
