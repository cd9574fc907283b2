// Package fake is a strict fal queue server on 127.0.0.1 for tests (the pages followed are those of
// package fal). A missing or unknown key answers 401, RevokedKey 401, LockedKey 403 "User is locked.
// Reason: Exhausted balance"; an unknown model id 404; an input field the model does not take, or a
// missing one, 422 with FastAPI's detail list. Requests move IN_QUEUE (queue_position) → IN_PROGRESS (a
// tqdm bar in the logs) → COMPLETED as they are polled (202 until completed, 200 then); the result of a
// failed request is its error (detail and error_type, X-Fal-Error-Type); output files are served without a
// key from /files/ (a request carrying the key is refused). Prompts carry scenarios: "[refuse]" completes
// at once with a 422 content_policy_violation result, "[refuse-output]" the same at the end, "[fail]"
// ends with a runner error, "[slow]" runs for ever. A cancelled request completes with a
// request_cancelled error (an assumption: fal's pages do not show that answer). Fail scripts 429 with
// Retry-After or 5xx answers.
//
// Models: fal-ai/flux/dev (image), fal-ai/bytedance/seedance/v1/lite/text-to-video and
// fal-ai/bytedance/seedance/v1/lite/image-to-video (video).
package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
)

// Keys the fake knows.
const (
	Key        = "fal-key-id:fal-key-secret"
	RevokedKey = "fal-revoked-id:secret"
	LockedKey  = "fal-locked-id:secret"
)

// Server is the fake.
type Server struct {
	*faketask.Host
}

// New starts a fake.
func New() *Server {
	s := &Server{}
	s.Host = faketask.Start(s.serve, "")
	return s
}

func detail(w http.ResponseWriter, status int, d any) {
	faketask.WriteJSON(w, status, map[string]any{"detail": d})
}

func validation(w http.ResponseWriter, field, msg, typ string) {
	detail(w, http.StatusUnprocessableEntity, []any{map[string]any{"loc": []string{"body", field}, "msg": msg, "type": typ}})
}

// ContentPolicyBody is fal's refusal of the content.
const ContentPolicyBody = `{"detail":[{"loc":["body","prompt"],"msg":"The content could not be processed because it contained material flagged by a content checker.","type":"content_policy_violation","url":"https://docs.fal.ai/errors#content_policy_violation","input":"x","categories":["sexual"]}]}`

type field func(any) bool

func str(v any) bool { _, ok := v.(string); return ok }
func num(v any) bool { _, ok := v.(float64); return ok }
func flag(v any) bool {
	_, ok := v.(bool)
	return ok
}
func enum(vals ...string) field {
	return func(v any) bool { s, ok := v.(string); return ok && slices.Contains(vals, s) }
}
func uri(v any) bool {
	s, ok := v.(string)
	return ok && (strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "data:"))
}
func size(v any) bool {
	if enum("square_hd", "square", "portrait_4_3", "portrait_16_9", "landscape_4_3", "landscape_16_9")(v) {
		return true
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return false
	}
	w, wok := m["width"].(float64)
	h, hok := m["height"].(float64)
	return wok && hok && w >= 64 && h >= 64 && w <= 14142 && h <= 14142
}

type model struct {
	kind     string
	fields   map[string]field
	required []string
}

var durations = enum("2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12")

var models = map[string]model{
	"fal-ai/flux/dev": {kind: "image", required: []string{"prompt"}, fields: map[string]field{"prompt": str, "image_size": size,
		"num_inference_steps": num, "seed": num, "guidance_scale": num, "sync_mode": flag, "num_images": num,
		"enable_safety_checker": flag, "output_format": enum("jpeg", "png"), "acceleration": enum("none", "regular", "high")}},
	"fal-ai/bytedance/seedance/v1/lite/text-to-video": {kind: "video", required: []string{"prompt"}, fields: map[string]field{"prompt": str,
		"aspect_ratio": enum("21:9", "16:9", "4:3", "1:1", "3:4", "9:16", "9:21"), "resolution": enum("480p", "720p", "1080p"),
		"duration": durations, "camera_fixed": flag, "seed": num, "enable_safety_checker": flag}},
	"fal-ai/bytedance/seedance/v1/lite/image-to-video": {kind: "video", required: []string{"prompt", "image_url"}, fields: map[string]field{"prompt": str,
		"image_url": uri, "end_image_url": uri, "aspect_ratio": enum("auto", "21:9", "16:9", "4:3", "1:1", "3:4", "9:16"),
		"resolution": enum("480p", "720p", "1080p"), "duration": durations, "camera_fixed": flag, "seed": num, "enable_safety_checker": flag}},
}

// app is the owner/app part of a model id.
func app(id string) string {
	parts := strings.Split(id, "/")
	return strings.Join(parts[:min(2, len(parts))], "/")
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/files/") {
		s.Record(r)
		s.file(w, r)
		return
	}
	rec := s.Record(r)
	switch r.Header.Get("Authorization") {
	case "Key " + Key:
	case "Key " + LockedKey:
		detail(w, http.StatusForbidden, "User is locked. Reason: Exhausted balance. Top up your balance at fal.ai/dashboard/billing.")
		return
	case "":
		detail(w, http.StatusUnauthorized, "Authentication is required to access this application.")
		return
	default:
		detail(w, http.StatusUnauthorized, "No user found for Key ID and Secret")
		return
	}
	if s.Fault(w, r) {
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	if m, ok := models[path]; ok && r.Method == http.MethodPost {
		s.submit(w, path, m, rec.Body)
		return
	}
	i := strings.Index(path, "/requests/")
	if i < 0 {
		detail(w, http.StatusNotFound, "Application not found: "+path)
		return
	}
	appID, rest := path[:i], path[i+len("/requests/"):]
	id, action, _ := strings.Cut(rest, "/")
	t, ok := s.Peek(id)
	if !ok || app(t.Extra["model"]) != appID {
		faketask.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "Request not found", "status": "NOT_FOUND"})
		return
	}
	switch {
	case r.Method == http.MethodGet && action == "status":
		s.status(w, r, t)
	case r.Method == http.MethodGet && action == "":
		s.result(w, t)
	case r.Method == http.MethodPut && action == "cancel":
		if _, ok := s.Cancel(id, false); !ok {
			faketask.WriteJSON(w, http.StatusBadRequest, map[string]any{"status": "ALREADY_COMPLETED"})
			return
		}
		faketask.WriteJSON(w, http.StatusAccepted, map[string]any{"status": "CANCELLATION_REQUESTED"})
	default:
		detail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
	}
}

func (s *Server) submit(w http.ResponseWriter, modelID string, m model, body []byte) {
	var in map[string]any
	if err := faketask.Strict(body, &in); err != nil || in == nil {
		validation(w, "", "body is not a JSON object", "type_error.dict")
		return
	}
	for k, v := range in {
		check, ok := m.fields[k]
		if !ok {
			validation(w, k, "extra fields not permitted", "value_error.extra")
			return
		}
		if !check(v) {
			validation(w, k, fmt.Sprintf("value is not valid: %v", v), "value_error")
			return
		}
	}
	for _, k := range m.required {
		if _, ok := in[k]; !ok {
			validation(w, k, "field required", "value_error.missing")
			return
		}
	}
	prompt, _ := in["prompt"].(string)
	// Request ids are UUIDs: 764cabcf-b745-4b3e-ae38-12003040NNNN.
	id := s.NewTask("764cabcf-b745-4b3e-ae38-12003040", m.kind, "", prompt).ID
	s.SetExtra(id, "model", modelID)
	base := s.URL + "/" + app(modelID) + "/requests/" + id
	faketask.WriteJSON(w, http.StatusOK, map[string]any{"status": "IN_QUEUE", "request_id": id, "response_url": base,
		"status_url": base + "/status", "cancel_url": base + "/cancel", "queue_position": 0})
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, t faketask.Task) {
	if !strings.Contains(t.Prompt, "[refuse]") {
		t, _ = s.Poll(t.ID)
	}
	base := s.URL + "/" + app(t.Extra["model"]) + "/requests/" + t.ID
	out := map[string]any{"request_id": t.ID, "response_url": base, "status_url": base + "/status", "cancel_url": base + "/cancel"}
	logs := []any{}
	code := http.StatusAccepted
	switch {
	case t.State == faketask.Queued && !strings.Contains(t.Prompt, "[refuse]"):
		out["status"], out["queue_position"] = "IN_QUEUE", 2
	case t.State == faketask.Running:
		out["status"] = "IN_PROGRESS"
		pct := min(95, 10*(t.Polls-1))
		logs = append(logs, map[string]any{"message": "Loading pipeline", "level": "INFO", "source": "USER", "timestamp": "2026-11-26T10:00:00Z"},
			map[string]any{"message": fmt.Sprintf("%3d%%|███▌      | %d/20 [00:02<00:02,  4.10it/s]", pct, pct/5), "level": "STDERR", "source": "USER", "timestamp": "2026-11-26T10:00:02Z"})
	default:
		out["status"], code = "COMPLETED", http.StatusOK
		out["metrics"] = map[string]any{"inference_time": 3.2}
	}
	if r.URL.Query().Get("logs") == "1" {
		out["logs"] = logs
	}
	faketask.WriteJSON(w, code, out)
}

func (s *Server) result(w http.ResponseWriter, t faketask.Task) {
	errorType := func(typ string) { w.Header().Set("X-Fal-Error-Type", typ) }
	switch {
	case strings.Contains(t.Prompt, "[refuse]") || t.State == faketask.Failed && t.Outcome == "refuse":
		errorType("content_policy_violation")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(ContentPolicyBody))
	case t.State == faketask.Failed:
		errorType("runner_server_error")
		faketask.WriteJSON(w, http.StatusInternalServerError, map[string]any{"detail": "Internal server error in the runner", "error_type": "runner_server_error"})
	case t.State == faketask.Cancelled:
		errorType("request_cancelled")
		faketask.WriteJSON(w, http.StatusBadRequest, map[string]any{"detail": "Request was cancelled.", "error_type": "request_cancelled"})
	case t.State != faketask.Succeeded:
		detail(w, http.StatusBadRequest, "Request is still in progress")
	case t.Kind == "video":
		faketask.WriteJSON(w, http.StatusOK, map[string]any{"video": map[string]any{"url": s.URL + "/files/" + t.ID + "/output.mp4",
			"content_type": "video/mp4", "file_name": "output.mp4", "file_size": len(fakeupstream.MP4)}, "seed": 42})
	default:
		raw, _ := json.Marshal(map[string]any{"images": []any{map[string]any{"url": s.URL + "/files/" + t.ID + "/output.png", "width": 1024,
			"height": 1024, "content_type": "image/png"}}, "timings": map[string]any{"inference": 1.2}, "seed": 42,
			"has_nsfw_concepts": []bool{false}, "prompt": t.Prompt})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(raw)
	}
}

func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		http.Error(w, "the CDN takes no key", http.StatusBadRequest)
		return
	}
	id := strings.Split(strings.TrimPrefix(r.URL.Path, "/files/"), "/")[0]
	t, ok := s.Peek(id)
	if !ok || t.State != faketask.Succeeded {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if t.Kind == "video" {
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = w.Write(fakeupstream.MP4)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(fakeupstream.PNG(t.Prompt))
}
