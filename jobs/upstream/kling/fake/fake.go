// Package fake is a strict Kling server on 127.0.0.1 for tests (pages followed: those of package
// kling). It checks the JWT of every call (HS256 signature by the secret key of AccessKey, iss, exp and
// nbf): a wrong or expired token answers 401 (code 1000-1004), RevokedAccessKey 401 1000, ArrearsAccessKey
// 429 1101; unknown or missing fields, a model_name the endpoint does not list, or Base64 with a data:
// prefix answer 400 1201. Tasks move submitted → processing → succeed or
// failed as they are polled; a prompt with "[refuse]" is refused at submission (1301), "[refuse-output]"
// fails its task with a risk-control message, "[fail]" fails it, "[slow]" runs for ever. Video tasks are
// also found by their external_task_id.
package fake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
)

// Keys the fake knows.
const (
	AccessKey        = "kling-ak"
	SecretKey        = "kling-sk"
	RevokedAccessKey = "kling-ak-revoked"
	ArrearsAccessKey = "kling-ak-arrears"
)

// Server is the fake.
type Server struct {
	*faketask.Host
	mu   sync.Mutex
	hold time.Duration
}

// HoldAnswers makes the next submissions create their task, then hold the answer d (the client gives up
// first: the answer is lost while the task exists).
func (s *Server) HoldAnswers(d time.Duration) {
	s.mu.Lock()
	s.hold = d
	s.mu.Unlock()
}

// New starts a fake.
func New() *Server {
	s := &Server{}
	s.Host = faketask.Start(s.serve, "")
	return s
}

func answer(w http.ResponseWriter, status, code int, msg string, data any) {
	faketask.WriteJSON(w, status, map[string]any{"code": code, "message": msg, "request_id": "req-1", "data": data})
}

// checkToken verifies a JWT; it returns the issuer or a Kling code.
func checkToken(h string) (string, int) {
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return "", 1001
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", 1002
	}
	var head struct{ Alg, Typ string }
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if json.Unmarshal(hb, &head) != nil || head.Alg != "HS256" || head.Typ != "JWT" {
		return "", 1002
	}
	var claims struct {
		Iss string `json:"iss"`
		Exp int64  `json:"exp"`
		Nbf int64  `json:"nbf"`
	}
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if json.Unmarshal(cb, &claims) != nil || claims.Iss == "" || claims.Exp == 0 || claims.Nbf == 0 {
		return "", 1002
	}
	mac := hmac.New(sha256.New, []byte(SecretKey))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return "", 1002
	}
	now := time.Now().Unix()
	if now >= claims.Exp {
		return "", 1004
	}
	if now < claims.Nbf {
		return "", 1003
	}
	return claims.Iss, 0
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/files/") {
		if strings.HasSuffix(r.URL.Path, ".png") {
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(fakeupstream.PNG(r.URL.Path))
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = w.Write(fakeupstream.MP4)
		return
	}
	rec := s.Record(r)
	iss, code := checkToken(r.Header.Get("Authorization"))
	switch {
	case code != 0:
		answer(w, http.StatusUnauthorized, code, "Authentication failed", nil)
		return
	case iss == RevokedAccessKey:
		answer(w, http.StatusUnauthorized, 1000, "Authentication failed", nil)
		return
	case iss == ArrearsAccessKey:
		answer(w, http.StatusTooManyRequests, 1101, "Account arrears", nil)
		return
	case iss != AccessKey:
		answer(w, http.StatusUnauthorized, 1002, "Authorization is invalid", nil)
		return
	}
	if s.Fault(w, r) {
		return
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && p == "/account/costs":
		if r.URL.Query().Get("start_time") == "" || r.URL.Query().Get("end_time") == "" {
			answer(w, http.StatusBadRequest, 1201, "start_time and end_time are required", nil)
			return
		}
		answer(w, http.StatusOK, 0, "SUCCEED", map[string]any{"code": 0, "msg": "", "resource_pack_subscribe_infos": []any{}})
	case r.Method == http.MethodPost && slices.Contains([]string{"/v1/images/generations", "/v1/videos/text2video", "/v1/videos/image2video"}, p):
		s.create(w, strings.TrimPrefix(p, "/v1/"), rec.Body)
	case r.Method == http.MethodGet && (strings.HasPrefix(p, "/v1/images/generations/") || strings.HasPrefix(p, "/v1/videos/text2video/") || strings.HasPrefix(p, "/v1/videos/image2video/")):
		i := strings.LastIndex(p, "/")
		s.get(w, strings.TrimPrefix(p[:i], "/v1/"), p[i+1:])
	default:
		answer(w, http.StatusNotFound, 1202, "no such path "+p, nil)
	}
}

type imageBody struct {
	ModelName      string   `json:"model_name"`
	Prompt         string   `json:"prompt"`
	NegativePrompt string   `json:"negative_prompt"`
	Image          string   `json:"image"`
	ImageReference string   `json:"image_reference"`
	ImageFidelity  *float64 `json:"image_fidelity"`
	HumanFidelity  *float64 `json:"human_fidelity"`
	Resolution     string   `json:"resolution"`
	N              *int     `json:"n"`
	AspectRatio    string   `json:"aspect_ratio"`
	WatermarkInfo  *struct {
		Enabled bool `json:"enabled"`
	} `json:"watermark_info"`
	CallbackURL    string `json:"callback_url"`
	ExternalTaskID string `json:"external_task_id"`
}

// Models of each endpoint (the model_name enumerations of the API reference; kling-v3 as sent to
// text2video in public client logs).
var models = map[string][]string{
	"images/generations": {"kling-v1", "kling-v1-5", "kling-v2", "kling-v2-new", "kling-v2-1"},
	"videos/text2video":  {"kling-v1", "kling-v1-6", "kling-v2-master", "kling-v2-1-master", "kling-v2-5-turbo", "kling-v2-6", "kling-v3"},
	"videos/image2video": {"kling-v1", "kling-v1-5", "kling-v1-6", "kling-v2-master", "kling-v2-1", "kling-v2-1-master", "kling-v2-5-turbo", "kling-v2-6", "kling-v3"},
}

type videoBody struct {
	ModelName      string   `json:"model_name"`
	Prompt         string   `json:"prompt"`
	NegativePrompt string   `json:"negative_prompt"`
	CfgScale       *float64 `json:"cfg_scale"`
	Mode           string   `json:"mode"`
	AspectRatio    string   `json:"aspect_ratio"`
	Duration       string   `json:"duration"`
	Image          string   `json:"image"`
	ImageTail      string   `json:"image_tail"`
	Sound          string   `json:"sound"`
	CameraControl  *struct {
		Type   string         `json:"type"`
		Config map[string]int `json:"config"`
	} `json:"camera_control"`
	StaticMask   string            `json:"static_mask"`
	DynamicMasks []json.RawMessage `json:"dynamic_masks"`
	VoiceList    []struct {
		VoiceID string `json:"voice_id"`
	} `json:"voice_list"`
	WatermarkInfo *struct {
		Enabled bool `json:"enabled"`
	} `json:"watermark_info"`
	CallbackURL    string `json:"callback_url"`
	ExternalTaskID string `json:"external_task_id"`
}

func (s *Server) create(w http.ResponseWriter, kind string, body []byte) {
	bad := func(msg string) { answer(w, http.StatusBadRequest, 1201, msg, nil) }
	var prompt, ref string
	if kind == "images/generations" {
		var b imageBody
		if err := faketask.Strict(body, &b); err != nil {
			bad(err.Error())
			return
		}
		if b.Prompt == "" {
			bad("prompt is required")
			return
		}
		if b.ModelName != "" && !slices.Contains(models[kind], b.ModelName) {
			answer(w, http.StatusBadRequest, 1201, "model_name "+b.ModelName+" is not supported", nil)
			return
		}
		if b.AspectRatio != "" && !slices.Contains([]string{"16:9", "9:16", "1:1", "4:3", "3:4", "3:2", "2:3", "21:9"}, b.AspectRatio) {
			bad("aspect_ratio")
			return
		}
		if b.Resolution != "" && b.Resolution != "1k" && b.Resolution != "2k" {
			bad("resolution")
			return
		}
		if b.Image != "" {
			if strings.HasPrefix(b.Image, "data:") {
				bad("image: base64 must not carry a data: prefix")
				return
			}
			if _, err := base64.StdEncoding.DecodeString(b.Image); err != nil && !strings.HasPrefix(b.Image, "http") {
				bad("image")
				return
			}
		}
		prompt = b.Prompt
	} else {
		var b videoBody
		if err := faketask.Strict(body, &b); err != nil {
			bad(err.Error())
			return
		}
		if (kind == "videos/text2video" && b.Prompt == "") || (kind == "videos/image2video" && b.Image == "") {
			bad("required field missing")
			return
		}
		if b.ModelName != "" && !slices.Contains(models[kind], b.ModelName) {
			bad("model_name " + b.ModelName + " is not supported")
			return
		}
		if strings.HasPrefix(b.Image, "data:") || strings.HasPrefix(b.ImageTail, "data:") {
			bad("image: base64 must not carry a data: prefix")
			return
		}
		if b.Sound != "" && b.Sound != "on" && b.Sound != "off" {
			bad("sound")
			return
		}
		if kind == "videos/image2video" && b.AspectRatio != "" {
			bad("aspect_ratio is not a field of image2video")
			return
		}
		if (b.Mode != "" && b.Mode != "std" && b.Mode != "pro") || (b.Duration != "" && b.Duration != "5" && b.Duration != "10") ||
			(b.AspectRatio != "" && !slices.Contains([]string{"16:9", "9:16", "1:1"}, b.AspectRatio)) {
			bad("mode, duration or aspect_ratio")
			return
		}
		if b.ExternalTaskID != "" {
			if _, dup := s.ByRef(b.ExternalTaskID); dup {
				bad("external_task_id already exists")
				return
			}
		}
		prompt, ref = b.Prompt, b.ExternalTaskID
	}
	if strings.Contains(prompt, "[refuse]") {
		answer(w, http.StatusBadRequest, 1301, "Trigger the content security policy of the platform", nil)
		return
	}
	t := s.NewTask("", kind, ref, prompt)
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	time.Sleep(hold)
	answer(w, http.StatusOK, 0, "SUCCEED", s.data(*t))
}

func (s *Server) data(t faketask.Task) map[string]any {
	status := map[faketask.State]string{faketask.Queued: "submitted", faketask.Running: "processing", faketask.Succeeded: "succeed", faketask.Failed: "failed"}[t.State]
	d := map[string]any{"task_id": "kt" + t.ID, "task_status": status, "task_info": map[string]any{"external_task_id": t.Ref},
		"created_at": t.Created.UnixMilli(), "updated_at": t.Created.UnixMilli()}
	switch t.State {
	case faketask.Succeeded:
		if t.Kind == "images/generations" {
			d["task_result"] = map[string]any{"images": []any{map[string]any{"index": 0, "url": s.Root + "/files/kt" + t.ID + ".png"}}}
		} else {
			d["task_result"] = map[string]any{"videos": []any{map[string]any{"id": "v" + t.ID, "url": s.Root + "/files/kt" + t.ID + ".mp4", "duration": "5.1"}}}
		}
	case faketask.Failed:
		d["task_status_msg"] = "Failure to pass the risk control system"
		if t.Outcome == "fail" {
			d["task_status_msg"] = "internal error"
		}
	}
	return d
}

func (s *Server) get(w http.ResponseWriter, kind, id string) {
	var t faketask.Task
	var ok bool
	if strings.HasPrefix(id, "kt") {
		if t, ok = s.Peek(strings.TrimPrefix(id, "kt")); ok {
			t, ok = s.Poll(t.ID)
		}
	} else if found, okRef := s.ByRef(id); okRef {
		t, ok = s.Poll(found.ID)
	}
	if !ok || t.Kind != kind {
		answer(w, http.StatusNotFound, 1203, "task not found", nil)
		return
	}
	answer(w, http.StatusOK, 0, "SUCCEED", s.data(t))
}
