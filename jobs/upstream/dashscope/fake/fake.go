// Package fake is a strict DashScope server on 127.0.0.1 for tests (pages followed: those of package
// dashscope). Text-to-video (t2v) and image-to-video (i2v) models are served on
// /services/aigc/video-generation/video-synthesis, first-and-last-frame (kf2v) models only on
// /services/aigc/image2video/video-synthesis. A wrong key answers 401 InvalidApiKey, OverdueKey 400 Arrearage; a submission without
// X-DashScope-Async: enable answers 403 AccessDenied (as DashScope does for these models); unknown or
// missing fields answer 400 InvalidParameter. Tasks move PENDING → RUNNING → SUCCEEDED or FAILED as they
// are polled; "[refuse]" in a prompt is refused at submission (DataInspectionFailed), "[refuse-output]"
// fails the task with DataInspectionFailed, "[fail]" fails it, "[slow]" runs for ever.
package fake

import (
	"net/http"
	"regexp"
	"slices"
	"strings"

	"studio/jobs/upstream/faketask"
	"studio/jobs/upstream/fakeupstream"
)

// Keys the fake knows.
const (
	Key        = "sk-dashscope-test"
	OverdueKey = "sk-dashscope-overdue"
)

// Server is the fake.
type Server struct {
	*faketask.Host
}

// New starts a fake.
func New() *Server {
	s := &Server{}
	s.Host = faketask.Start(s.serve, "/api/v1")
	return s
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	faketask.WriteJSON(w, status, map[string]any{"request_id": "r-1", "code": code, "message": msg})
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
	switch r.Header.Get("Authorization") {
	case "Bearer " + Key:
	case "Bearer " + OverdueKey:
		fail(w, http.StatusBadRequest, "Arrearage", "Access denied, please make sure your account is in good standing.")
		return
	default:
		fail(w, http.StatusUnauthorized, "InvalidApiKey", "Invalid API-key provided.")
		return
	}
	if s.Fault(w, r) {
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/api/v1")
	switch {
	case r.Method == http.MethodPost && (p == "/services/aigc/video-generation/video-synthesis" || p == "/services/aigc/image2video/video-synthesis" || p == "/services/aigc/text2image/image-synthesis"):
		if r.Header.Get("X-DashScope-Async") != "enable" {
			fail(w, http.StatusForbidden, "AccessDenied", "current user api does not support synchronous calls")
			return
		}
		s.create(w, p, rec.Body)
	case r.Method == http.MethodGet && p == "/tasks":
		faketask.WriteJSON(w, http.StatusOK, map[string]any{"request_id": "r-1", "data": []any{}, "total": 0, "page_no": 1, "page_size": 1})
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/tasks/"):
		s.get(w, strings.TrimPrefix(p, "/tasks/"))
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/tasks/") && strings.HasSuffix(p, "/cancel"):
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/tasks/"), "/cancel")
		state, ok := s.Cancel(strings.TrimPrefix(id, "ds-"), true)
		switch {
		case state == "":
			fail(w, http.StatusNotFound, "InvalidParameter", "task not found")
		case ok:
			faketask.WriteJSON(w, http.StatusOK, map[string]any{"request_id": "r-1"})
		default:
			fail(w, http.StatusBadRequest, "UnsupportedOperation", "only PENDING tasks can be canceled")
		}
	default:
		fail(w, http.StatusNotFound, "NotFound", "no such path "+p)
	}
}

type body struct {
	Model string `json:"model"`
	Input struct {
		Prompt         string   `json:"prompt"`
		NegativePrompt string   `json:"negative_prompt"`
		ImgURL         string   `json:"img_url"`
		FirstFrameURL  string   `json:"first_frame_url"`
		LastFrameURL   string   `json:"last_frame_url"`
		AudioURL       string   `json:"audio_url"`
		Images         []string `json:"images"`
	} `json:"input"`
	Parameters struct {
		Size         string `json:"size"`
		Resolution   string `json:"resolution"`
		Duration     *int   `json:"duration"`
		N            *int   `json:"n"`
		Watermark    *bool  `json:"watermark"`
		PromptExtend *bool  `json:"prompt_extend"`
		Seed         *int64 `json:"seed"`
		Audio        *bool  `json:"audio"`
	} `json:"parameters"`
}

var sizeRE = regexp.MustCompile(`^\d{3,4}\*\d{3,4}$`)

func (s *Server) create(w http.ResponseWriter, path string, raw []byte) {
	var b body
	if err := faketask.Strict(raw, &b); err != nil {
		fail(w, http.StatusBadRequest, "InvalidParameter", err.Error())
		return
	}
	video := strings.Contains(path, "video")
	if b.Model == "" || (b.Input.Prompt == "" && b.Input.ImgURL == "" && b.Input.FirstFrameURL == "") {
		fail(w, http.StatusBadRequest, "InvalidParameter", "Field required: model, input.prompt")
		return
	}
	// Each endpoint serves its models and takes its fields: first-and-last-frame (kf2v) models only on
	// image2video/video-synthesis, with first_frame_url and last_frame_url; image-to-video (i2v) models
	// need img_url, text-to-video (t2v) models take none.
	keyframe := path == "/services/aigc/image2video/video-synthesis"
	switch {
	case keyframe != strings.Contains(b.Model, "kf2v"):
		fail(w, http.StatusBadRequest, "InvalidParameter", "Model not exist or not supported on this url: "+b.Model)
		return
	case keyframe && (b.Input.FirstFrameURL == "" || b.Input.LastFrameURL == "" || b.Input.ImgURL != "" || b.Parameters.Size != "" || b.Parameters.Audio != nil):
		fail(w, http.StatusBadRequest, "InvalidParameter", "kf2v takes input.first_frame_url, input.last_frame_url and parameters.resolution")
		return
	case !keyframe && (b.Input.FirstFrameURL != "" || b.Input.LastFrameURL != ""):
		fail(w, http.StatusBadRequest, "InvalidParameter", "first_frame_url and last_frame_url are fields of image2video/video-synthesis")
		return
	case strings.Contains(b.Model, "i2v") && (b.Input.ImgURL == "" || b.Parameters.Size != ""):
		fail(w, http.StatusBadRequest, "InvalidParameter", "an i2v model takes input.img_url and parameters.resolution")
		return
	case strings.Contains(b.Model, "t2v") && (b.Input.ImgURL != "" || b.Parameters.Resolution != ""):
		fail(w, http.StatusBadRequest, "InvalidParameter", "a t2v model takes no image and parameters.size")
		return
	}
	if b.Parameters.Size != "" && !sizeRE.MatchString(b.Parameters.Size) {
		fail(w, http.StatusBadRequest, "InvalidParameter", "size must be W*H")
		return
	}
	if b.Parameters.Resolution != "" && !slices.Contains([]string{"480P", "720P", "1080P"}, b.Parameters.Resolution) {
		fail(w, http.StatusBadRequest, "InvalidParameter", "resolution")
		return
	}
	if video && b.Parameters.Size != "" && b.Parameters.Resolution != "" {
		fail(w, http.StatusBadRequest, "InvalidParameter", "size and resolution are exclusive")
		return
	}
	if strings.Contains(b.Input.Prompt, "[refuse]") {
		fail(w, http.StatusBadRequest, "DataInspectionFailed", "Input data may contain inappropriate content.")
		return
	}
	kind := "image"
	if video {
		kind = "video"
	}
	t := s.NewTask("", kind, "", b.Input.Prompt)
	faketask.WriteJSON(w, http.StatusOK, map[string]any{"request_id": "r-1", "output": map[string]any{"task_id": "ds-" + t.ID, "task_status": "PENDING"}})
}

func (s *Server) get(w http.ResponseWriter, id string) {
	t, ok := s.Poll(strings.TrimPrefix(id, "ds-"))
	if !ok {
		fail(w, http.StatusNotFound, "InvalidParameter", "task "+id+" not found")
		return
	}
	out := map[string]any{"task_id": id}
	switch t.State {
	case faketask.Queued:
		out["task_status"] = "PENDING"
	case faketask.Running:
		out["task_status"] = "RUNNING"
	case faketask.Cancelled:
		out["task_status"] = "CANCELED"
	case faketask.Succeeded:
		out["task_status"] = "SUCCEEDED"
		if t.Kind == "video" {
			out["video_url"] = s.Root + "/files/" + id + ".mp4"
		} else {
			out["results"] = []any{map[string]any{"url": s.Root + "/files/" + id + ".png"}}
		}
	case faketask.Failed:
		out["task_status"], out["code"], out["message"] = "FAILED", "InternalError", "internal error"
		if t.Outcome == "refuse" {
			out["code"], out["message"] = "DataInspectionFailed", "Output data may contain inappropriate content."
		}
	}
	faketask.WriteJSON(w, http.StatusOK, map[string]any{"request_id": "r-1", "output": out})
}
