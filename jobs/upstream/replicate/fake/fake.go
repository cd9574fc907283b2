// Package fake is a strict Replicate server on 127.0.0.1 for tests (the pages followed are those of
// package replicate). A missing or wrong token answers 401 Unauthenticated, RevokedKey 401 too and
// NoCreditKey 402 Insufficient credit; an unknown model or version 404; a body or input field the model
// does not take, or a missing prompt, 422 Input validation failed (as Replicate validates against the
// model's schema). Predictions move starting → processing (with tqdm progress in their logs) →
// succeeded, failed or canceled as they are polled; output files are served without a key from
// /delivery/ (a request that carries the token is refused, as a key must not leave for another host).
// Prompts carry scenarios: "[refuse]" fails at once with E005 (flagged as sensitive), "[refuse-output]"
// fails at the end with NSFW content detected, "[fail]" fails, "[slow]" runs for ever. Fail scripts 429
// with Retry-After or 5xx answers.
//
// Models: black-forest-labs/flux-1.1-pro (image, one output URL), the version FluxSchnellVersion of
// black-forest-labs/flux-schnell (image, a list of URLs) and bytedance/seedance-1-lite (video).
package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
)

// Keys the fake knows.
const (
	Key         = "r8_studio_test_token"
	RevokedKey  = "r8_revoked_token"
	NoCreditKey = "r8_no_credit_token"
)

// FluxSchnellVersion is the version id of black-forest-labs/flux-schnell the fake serves.
const FluxSchnellVersion = "5599ed30703defd1d160a25a63321b4dec97101d98b4674bcc56e41f62f35637"

// Server is the fake.
type Server struct {
	*faketask.Host
}

// New starts a fake.
func New() *Server {
	s := &Server{}
	s.Host = faketask.Start(s.serve, "/v1")
	return s
}

// Problem writes a problem-details error as Replicate does.
func Problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": title, "detail": detail, "status": status})
}

// ThrottledBody is Replicate's 429.
const ThrottledBody = `{"title":"Request was throttled.","detail":"Request was throttled. Expected available in 1 second.","status":429}`

// schema is what a model takes: its input fields and its kind.
type schema struct {
	kind   string // image or video
	list   bool   // the output is a list of URLs
	fields map[string]func(any) bool
}

func str(v any) bool { _, ok := v.(string); return ok }
func num(v any) bool { _, ok := v.(float64); return ok }
func boolean(v any) bool {
	_, ok := v.(bool)
	return ok
}
func enum(vals ...string) func(any) bool {
	return func(v any) bool { s, ok := v.(string); return ok && slices.Contains(vals, s) }
}
func uri(v any) bool {
	s, ok := v.(string)
	return ok && (strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "data:"))
}

var models = map[string]schema{
	"black-forest-labs/flux-1.1-pro": {kind: "image", fields: map[string]func(any) bool{
		"prompt": str, "aspect_ratio": enum("custom", "1:1", "16:9", "3:2", "2:3", "4:5", "5:4", "9:16", "3:4", "4:3"),
		"width": num, "height": num, "image_prompt": uri, "output_format": enum("webp", "jpg", "png"), "output_quality": num,
		"safety_tolerance": num, "seed": num, "prompt_upsampling": boolean}},
	"black-forest-labs/flux-schnell:" + FluxSchnellVersion: {kind: "image", list: true, fields: map[string]func(any) bool{
		"prompt": str, "aspect_ratio": enum("1:1", "16:9", "21:9", "3:2", "2:3", "4:5", "5:4", "3:4", "4:3", "9:16", "9:21"),
		"num_outputs": num, "num_inference_steps": num, "seed": num, "output_format": enum("webp", "jpg", "png"),
		"output_quality": num, "disable_safety_checker": boolean, "go_fast": boolean, "megapixels": enum("1", "0.25")}},
	"bytedance/seedance-1-lite": {kind: "video", fields: map[string]func(any) bool{
		"prompt": str, "image": uri, "last_frame_image": uri, "reference_images": func(v any) bool { _, ok := v.([]any); return ok },
		"duration":   func(v any) bool { f, ok := v.(float64); return ok && f >= 2 && f <= 12 && f == float64(int(f)) },
		"resolution": enum("480p", "720p", "1080p"), "aspect_ratio": enum("16:9", "4:3", "1:1", "3:4", "9:16", "21:9", "9:21"),
		"fps": enum("24"), "camera_fixed": boolean, "seed": num}},
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/delivery/") {
		s.Record(r)
		s.deliver(w, r)
		return
	}
	rec := s.Record(r)
	switch r.Header.Get("Authorization") {
	case "Bearer " + Key:
	case "Bearer " + NoCreditKey:
		Problem(w, http.StatusPaymentRequired, "Insufficient credit", "You have insufficient credit to run this model. Go to https://replicate.com/account/billing#billing to purchase credit. Once you purchase credit, please wait a few minutes before trying again.")
		return
	default:
		Problem(w, http.StatusUnauthorized, "Unauthenticated", "You did not pass a valid authentication token")
		return
	}
	if s.Fault(w, r) {
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	switch {
	case r.Method == http.MethodGet && path == "/account":
		faketask.WriteJSON(w, http.StatusOK, map[string]any{"type": "organization", "username": "studio-test", "name": "Studio Test", "github_url": ""})
	case r.Method == http.MethodPost && path == "/predictions":
		s.create(w, "", rec.Body)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/models/") && strings.HasSuffix(path, "/predictions"):
		s.create(w, strings.TrimSuffix(strings.TrimPrefix(path, "/models/"), "/predictions"), rec.Body)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/predictions/") && !strings.Contains(path[len("/predictions/"):], "/"):
		id := path[len("/predictions/"):]
		t, ok := s.Peek(id)
		if !ok {
			Problem(w, http.StatusNotFound, "Not found", "The requested resource could not be found.")
			return
		}
		if !strings.Contains(t.Prompt, "[refuse]") {
			t, _ = s.Poll(id)
		}
		faketask.WriteJSON(w, http.StatusOK, s.answer(t))
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/predictions/") && strings.HasSuffix(path, "/cancel"):
		id := strings.TrimSuffix(path[len("/predictions/"):], "/cancel")
		if _, ok := s.Cancel(id, false); !ok {
			if _, found := s.Peek(id); !found {
				Problem(w, http.StatusNotFound, "Not found", "The requested resource could not be found.")
				return
			}
		}
		t, _ := s.Peek(id)
		faketask.WriteJSON(w, http.StatusOK, s.answer(t))
	default:
		Problem(w, http.StatusNotFound, "Not found", "The requested resource could not be found.")
	}
}

func (s *Server) deliver(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	if r.Header.Get("Authorization") != "" {
		http.Error(w, "replicate.delivery takes no token", http.StatusBadRequest)
		return
	}
	id := strings.Split(strings.TrimPrefix(r.URL.Path, "/delivery/"), "/")[0]
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

func invalid(w http.ResponseWriter, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": "Input validation failed", "detail": "- " + detail, "status": 422,
		"invalid_fields": []any{map[string]any{"type": "invalid", "field": "input", "description": detail}}})
}

func (s *Server) create(w http.ResponseWriter, model string, body []byte) {
	var b struct {
		Version             string         `json:"version"`
		Input               map[string]any `json:"input"`
		Webhook             string         `json:"webhook"`
		WebhookEventsFilter []string       `json:"webhook_events_filter"`
		Stream              *bool          `json:"stream"`
	}
	if err := faketask.Strict(body, &b); err != nil {
		invalid(w, "body: "+err.Error())
		return
	}
	key := model
	switch {
	case model == "" && b.Version == "":
		invalid(w, "version is required")
		return
	case model == "":
		for k := range models {
			if strings.HasSuffix(k, ":"+b.Version) {
				key = k
			}
		}
	case b.Version != "":
		invalid(w, "version is not allowed when running an official model")
		return
	}
	sc, ok := models[key]
	if !ok {
		Problem(w, http.StatusNotFound, "Not found", "The requested resource could not be found.")
		return
	}
	if b.Input == nil {
		invalid(w, "input is required")
		return
	}
	for k, v := range b.Input {
		check, known := sc.fields[k]
		if !known {
			invalid(w, "input: Additional property "+k+" is not allowed")
			return
		}
		if !check(v) {
			invalid(w, fmt.Sprintf("input.%s: %v is not valid", k, v))
			return
		}
	}
	prompt, _ := b.Input["prompt"].(string)
	if prompt == "" {
		invalid(w, "input: prompt is required")
		return
	}
	if _, last := b.Input["last_frame_image"]; last && b.Input["image"] == nil {
		invalid(w, "input: last_frame_image needs image")
		return
	}
	t := s.NewTask("rp", sc.kind, "", prompt)
	s.SetExtra(t.ID, "model", key)
	s.SetExtra(t.ID, "version", b.Version)
	if sc.list {
		s.SetExtra(t.ID, "list", "1")
	}
	raw, _ := json.Marshal(b.Input)
	s.SetExtra(t.ID, "input", string(raw))
	created, _ := s.Peek(t.ID)
	faketask.WriteJSON(w, http.StatusCreated, s.answer(created))
}

// answer is the Prediction object of a task.
func (s *Server) answer(t faketask.Task) map[string]any {
	var input map[string]any
	_ = json.Unmarshal([]byte(t.Extra["input"]), &input)
	model, _, _ := strings.Cut(t.Extra["model"], ":")
	get := s.URL + "/predictions/" + t.ID
	out := map[string]any{"id": t.ID, "model": model, "version": t.Extra["version"], "input": input, "source": "api",
		"created_at": t.Created.UTC().Format(time.RFC3339Nano), "output": nil, "error": nil, "logs": "",
		"urls": map[string]any{"get": get, "cancel": get + "/cancel", "web": "https://replicate.com/p/" + t.ID, "stream": "https://stream.replicate.com/v1/files/" + t.ID}}
	switch {
	case strings.Contains(t.Prompt, "[refuse]"):
		out["status"], out["error"] = "failed", "The input or output was flagged as sensitive. Please try again with different inputs. (E005)"
		return out
	case t.State == faketask.Queued:
		out["status"] = "starting"
	case t.State == faketask.Running:
		out["status"] = "processing"
		// Ten points a poll, as a model printing its tqdm bar (Progress percentage).
		pct := min(95, 10*(t.Polls-1))
		out["logs"] = fmt.Sprintf("Using seed: 42\n%3d%%|███▌      | %d/20 [00:02<00:02,  4.10it/s]", pct, pct/5)
	case t.State == faketask.Succeeded:
		out["status"] = "succeeded"
		ext := ".png"
		if t.Kind == "video" {
			ext = ".mp4"
		}
		file := s.Root + "/delivery/" + t.ID + "/out" + ext
		if t.Extra["list"] != "" {
			out["output"] = []string{file}
		} else {
			out["output"] = file
		}
		out["metrics"] = map[string]any{"predict_time": 4.2, "total_time": 4.5}
	case t.State == faketask.Failed:
		out["status"], out["error"] = "failed", "CUDA error: an illegal memory access was encountered"
		if t.Outcome == "refuse" {
			out["error"] = "NSFW content detected. Try running it again, or try a different prompt."
		}
	case t.State == faketask.Cancelled:
		out["status"] = "canceled"
	}
	return out
}
