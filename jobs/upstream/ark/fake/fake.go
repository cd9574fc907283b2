// Package fake is a strict Volcengine Ark server on 127.0.0.1 for tests (the pages followed are those of
// package ark): a wrong or missing key answers 401, unknown or missing fields 400, video tasks move queued
// → running → succeeded or failed as they are polled, and prompts carry scenarios: "[refuse]" is refused
// at submission (InputTextSensitiveContentDetected), "[refuse-output]" fails the task with
// OutputVideoSensitiveContentDetected, "[fail]" fails it, "[slow]" runs for ever. RevokedKey answers 401,
// OverdueKey 403 AccountOverdueError; Fail scripts 429 with Retry-After or 5xx answers.
package fake

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
)

// Keys the fake knows.
const (
	Key        = "ark-test-key"
	RevokedKey = "ark-revoked-key"
	OverdueKey = "ark-overdue-key"
)

// Server is the fake.
type Server struct {
	*faketask.Host
}

// New starts a fake.
func New() *Server {
	s := &Server{}
	s.Host = faketask.Start(s.serve, "/api/v3")
	return s
}

func apiErr(w http.ResponseWriter, status int, code, msg string) {
	faketask.WriteJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg + " Request id: 0217", "param": "", "type": "BadRequest"}})
}

// RefusedBody is the answer to a refused prompt.
const RefusedBody = `{"error":{"code":"InputTextSensitiveContentDetected","message":"The request failed because the input text may contain sensitive information.","param":"","type":"BadRequest"}}`

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/files/") { // the signed result URLs: no key
		if r.Method != http.MethodGet {
			http.Error(w, "method", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = w.Write(fakeupstream.MP4)
		return
	}
	rec := s.Record(r)
	switch r.Header.Get("Authorization") {
	case "Bearer " + Key:
	case "Bearer " + OverdueKey:
		apiErr(w, http.StatusForbidden, "AccountOverdueError", "The request failed because your account has an overdue balance.")
		return
	default:
		apiErr(w, http.StatusUnauthorized, "AuthenticationError", "The API key in the request is missing or invalid.")
		return
	}
	if s.Fault(w, r) {
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v3")
	switch {
	case r.Method == http.MethodPost && path == "/images/generations":
		s.images(w, rec.Body)
	case r.Method == http.MethodPost && path == "/contents/generations/tasks":
		s.create(w, rec.Body)
	case r.Method == http.MethodGet && path == "/contents/generations/tasks":
		s.list(w)
	case strings.HasPrefix(path, "/contents/generations/tasks/"):
		id := strings.TrimPrefix(path, "/contents/generations/tasks/")
		switch r.Method {
		case http.MethodGet:
			s.get(w, id)
		case http.MethodDelete:
			s.delete(w, id)
		default:
			apiErr(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "method not allowed")
		}
	default:
		apiErr(w, http.StatusNotFound, "NotFound", "no such path "+r.URL.Path)
	}
}

// imageBody is what Seedream accepts.
type imageBody struct {
	Model                     string   `json:"model"`
	Prompt                    string   `json:"prompt"`
	Image                     any      `json:"image"`
	ResponseFormat            string   `json:"response_format"`
	Seed                      *int64   `json:"seed"`
	GuidanceScale             *float64 `json:"guidance_scale"`
	Size                      string   `json:"size"`
	Watermark                 *bool    `json:"watermark"`
	SequentialImageGeneration string   `json:"sequential_image_generation"`
	Stream                    *bool    `json:"stream"`
	OutputFormat              string   `json:"output_format"`
}

func (s *Server) images(w http.ResponseWriter, body []byte) {
	var b imageBody
	if err := faketask.Strict(body, &b); err != nil {
		apiErr(w, http.StatusBadRequest, "InvalidParameter", "The parameter is invalid: "+err.Error())
		return
	}
	if b.Model == "" || b.Prompt == "" {
		apiErr(w, http.StatusBadRequest, "MissingParameter", "The request failed because it is missing one or multiple required parameters (model, prompt).")
		return
	}
	if b.ResponseFormat != "" && b.ResponseFormat != "url" && b.ResponseFormat != "b64_json" {
		apiErr(w, http.StatusBadRequest, "InvalidParameter", "response_format")
		return
	}
	var w0, h0 int
	if b.Size != "" && !slices.Contains([]string{"1K", "2K", "4K"}, b.Size) {
		if _, err := fmt.Sscanf(b.Size, "%dx%d", &w0, &h0); err != nil || w0*h0 < 1280*720 || w0*h0 > 4096*4096 {
			apiErr(w, http.StatusBadRequest, "InvalidParameter", "The parameter `size` specified in the request is not valid: "+b.Size)
			return
		}
	}
	var refs []string
	switch v := b.Image.(type) {
	case nil:
	case string:
		refs = []string{v}
	case []any:
		for _, x := range v {
			str, ok := x.(string)
			if !ok {
				apiErr(w, http.StatusBadRequest, "InvalidParameter", "image")
				return
			}
			refs = append(refs, str)
		}
	default:
		apiErr(w, http.StatusBadRequest, "InvalidParameter", "image")
		return
	}
	for _, ref := range refs {
		if !strings.HasPrefix(ref, "data:image/") && !strings.HasPrefix(ref, "http") {
			apiErr(w, http.StatusBadRequest, "InvalidParameter", "image must be a URL or a data URL")
			return
		}
	}
	if strings.Contains(b.Prompt, "[refuse]") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(RefusedBody))
		return
	}
	item := map[string]any{"size": b.Size}
	png := fakeupstream.PNG(b.Prompt)
	if b.ResponseFormat == "b64_json" {
		item["b64_json"] = base64.StdEncoding.EncodeToString(png)
	} else {
		item["url"] = s.Root + "/files/image.png"
	}
	faketask.WriteJSON(w, http.StatusOK, map[string]any{"model": b.Model, "created": 1, "data": []any{item},
		"usage": map[string]any{"generated_images": 1, "output_tokens": 4096, "total_tokens": 4096}})
}

// taskBody is what Seedance accepts.
type taskBody struct {
	Model                 string `json:"model"`
	Content               []item `json:"content"`
	CallbackURL           string `json:"callback_url"`
	ReturnLastFrame       *bool  `json:"return_last_frame"`
	ServiceTier           string `json:"service_tier"`
	ExecutionExpiresAfter *int64 `json:"execution_expires_after"`
	GenerateAudio         *bool  `json:"generate_audio"`
	Draft                 *bool  `json:"draft"`
	CameraFixed           *bool  `json:"camera_fixed"`
	Watermark             *bool  `json:"watermark"`
	Seed                  *int64 `json:"seed"`
	Resolution            string `json:"resolution"`
	Ratio                 string `json:"ratio"`
	Duration              *int   `json:"duration"`
	Frames                *int   `json:"frames"`
}

type item struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	VideoURL *struct {
		URL string `json:"url"`
	} `json:"video_url"`
	AudioURL *struct {
		URL string `json:"url"`
	} `json:"audio_url"`
	Role string `json:"role"`
}

func (s *Server) create(w http.ResponseWriter, body []byte) {
	var b taskBody
	if err := faketask.Strict(body, &b); err != nil {
		apiErr(w, http.StatusBadRequest, "InvalidParameter", "The parameter is invalid: "+err.Error())
		return
	}
	if b.Model == "" || len(b.Content) == 0 {
		apiErr(w, http.StatusBadRequest, "MissingParameter", "model and content are required")
		return
	}
	var prompt string
	for i, it := range b.Content {
		ok := false
		switch it.Type {
		case "text":
			ok, prompt = it.Text != "" && it.Role == "", it.Text
		case "image_url":
			ok = it.ImageURL != nil && it.ImageURL.URL != "" && slices.Contains([]string{"", "first_frame", "last_frame", "reference_image"}, it.Role)
		case "video_url":
			ok = it.VideoURL != nil && it.VideoURL.URL != "" && it.Role == "reference_video"
		case "audio_url":
			ok = it.AudioURL != nil && it.AudioURL.URL != "" && it.Role == "reference_audio"
		}
		if !ok {
			apiErr(w, http.StatusBadRequest, "InvalidParameter", fmt.Sprintf("content[%d] is not valid", i))
			return
		}
	}
	if b.Resolution != "" && !slices.Contains([]string{"480p", "720p", "1080p"}, b.Resolution) {
		apiErr(w, http.StatusBadRequest, "InvalidParameter", "resolution")
		return
	}
	if b.Ratio != "" && !slices.Contains([]string{"16:9", "4:3", "1:1", "3:4", "9:16", "21:9", "adaptive"}, b.Ratio) {
		apiErr(w, http.StatusBadRequest, "InvalidParameter", "ratio")
		return
	}
	if b.Duration != nil && (*b.Duration < 2 || *b.Duration > 15) && *b.Duration != -1 {
		apiErr(w, http.StatusBadRequest, "InvalidParameter", "duration")
		return
	}
	if strings.Contains(prompt, "[refuse]") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(RefusedBody))
		return
	}
	t := s.NewTask("cgt-2026", "video", "", prompt)
	s.SetExtra(t.ID, "model", b.Model)
	faketask.WriteJSON(w, http.StatusOK, map[string]any{"id": t.ID})
}

func (s *Server) answer(t faketask.Task) map[string]any {
	out := map[string]any{"id": t.ID, "model": t.Extra["model"], "status": string(t.State), "created_at": t.Created.Unix(), "updated_at": t.Created.Unix()}
	switch t.State {
	case faketask.Succeeded:
		out["content"] = map[string]any{"video_url": s.Root + "/files/" + t.ID + ".mp4"}
		out["usage"] = map[string]any{"completion_tokens": 108900, "total_tokens": 108900}
	case faketask.Failed:
		code, msg := "InternalServiceError", "The service encountered an unexpected internal error."
		if t.Outcome == "refuse" {
			code, msg = "OutputVideoSensitiveContentDetected", "The request failed because the output video may contain sensitive information."
		}
		out["error"] = map[string]any{"code": code, "message": msg}
	}
	return out
}

func (s *Server) get(w http.ResponseWriter, id string) {
	t, ok := s.Poll(id)
	if !ok {
		apiErr(w, http.StatusNotFound, "ResourceNotFound", "The specified task "+id+" is not found.")
		return
	}
	faketask.WriteJSON(w, http.StatusOK, s.answer(t))
}

func (s *Server) list(w http.ResponseWriter) {
	items := []any{}
	for _, t := range s.Tasks() {
		items = append(items, s.answer(t))
	}
	faketask.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "total": len(items)})
}

func (s *Server) delete(w http.ResponseWriter, id string) {
	state, ok := s.Cancel(id, true)
	switch {
	case state == "":
		apiErr(w, http.StatusNotFound, "ResourceNotFound", "The specified task "+id+" is not found.")
	case ok || state != faketask.Running:
		faketask.WriteJSON(w, http.StatusOK, map[string]any{})
	default:
		apiErr(w, http.StatusConflict, "InvalidAction.TaskRunning", "A running task cannot be cancelled.")
	}
}
