// Package dashscope is the upstream protocol `dashscope`: Alibaba Cloud Model Studio (百炼, DashScope),
// the Wan (通义万相) models, base_url https://dashscope.aliyuncs.com/api/v1 (default) or
// https://dashscope-intl.aliyuncs.com/api/v1.
//
// Every generation is an asynchronous task: the submission carries X-DashScope-Async: enable and
// Authorization: Bearer <api_key>. Videos: POST /services/aigc/video-generation/video-synthesis
// {model, input {prompt, img_url (an i2v model)}, parameters {size W*H (a t2v model) or resolution
// 480P|720P|1080P (from an image), duration, audio, watermark}}; a first and last frame need a kf2v
// model (wan2.2-kf2v-flash, wan2.1-kf2v-plus) on its own endpoint POST
// /services/aigc/image2video/video-synthesis {model, input {prompt, first_frame_url, last_frame_url},
// parameters {resolution, duration 5, watermark}}. Images: POST /services/aigc/text2image/image-synthesis
// {model, input {prompt}, parameters {size W*H, n 1, watermark}}. The answer is {output {task_id,
// task_status}, request_id}; GET /tasks/{task_id} polls it (PENDING, RUNNING, SUCCEEDED, FAILED,
// CANCELED, UNKNOWN; output.video_url or output.results[].url, valid 24 hours) and POST
// /tasks/{task_id}/cancel cancels a PENDING task. DashScope does not let the client name a task (a lost
// answer fails the job with its refund) and reports no progress figure.
//
// Errors are {request_id, code, message}: 401 InvalidApiKey (revoked), 403 AccessDenied* (revoked), 400
// Arrearage (the account is overdue: unpaid), 429 Throttling* (transient), 400 DataInspectionFailed,
// IPInfringementSuspect (a content refusal; also as the code of a failed task), 5xx transient.
//
// Read (2026): the pages https://www.alibabacloud.com/help/en/model-studio/text-to-video-api-reference,
// .../image-to-video-api-reference, .../image-to-video-by-first-and-last-frame-api-reference,
// .../image-to-video-first-and-last-frames-guide, https://docs.qwencloud.com/api-reference/video-generation/wan-image-to-video-first-last-frames/create-task,
// .../model-studio/developer-reference/error-code; and the official SDK github.com/dashscope/dashscope-sdk-python
// (1.26.2): dashscope/aigc/video_synthesis.py (input fields; a model naming kf2v goes to task
// image2video), dashscope/aigc/image_synthesis.py (task text2image, size, n, watermark),
// dashscope/client/base_api.py (GET /tasks/{id}, POST /tasks/{id}/cancel, GET /tasks?page_no&page_size).
// Silent or unread, assumed: the 480P sizes of text to video, the text-to-image v2 page (fields taken from
// the SDK), Wan 2.7's media[] input (not sent), and the HTTP status of each code past the 400 rows.
package dashscope

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"studio/jobs/upstream"
)

// Protocol is the name of the protocol in the upstreams file.
const Protocol upstream.Protocol = "dashscope"

// DefaultBaseURL is DashScope in the Beijing region.
const DefaultBaseURL = "https://dashscope.aliyuncs.com/api/v1"

func init() {
	upstream.RegisterProtocol(Protocol, upstream.ProtocolSpec{
		Capabilities: map[upstream.Media][]upstream.Capability{
			upstream.MediaImage: {},
			upstream.MediaVideo: {upstream.CapImages, upstream.CapGenerateAudio},
		},
		DefaultBaseURL: DefaultBaseURL,
		Required:       []string{"api_key", "model"},
		New:            func(cfg *upstream.Config) (upstream.TaskAdapter, error) { return New(cfg), nil },
	})
}

// Adapter talks to one DashScope upstream.
type Adapter struct {
	cfg  *upstream.Config
	http *upstream.HTTP
}

// New returns the adapter of an upstream.
func New(cfg *upstream.Config) *Adapter {
	return &Adapter{cfg: cfg, http: upstream.NewHTTP(cfg.Name, classify)}
}

func (a *Adapter) header(async bool) http.Header {
	h := http.Header{"Authorization": {"Bearer " + a.cfg.APIKey}}
	if async {
		h.Set("X-DashScope-Async", "enable")
	}
	return h
}

type answer struct {
	Output struct {
		TaskID     string `json:"task_id"`
		TaskStatus string `json:"task_status"`
		VideoURL   string `json:"video_url"`
		Results    []struct {
			URL string `json:"url"`
		} `json:"results"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"output"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// videoSize is the W*H of a text-to-video at a resolution and ratio.
func videoSize(resolution, ratio string) (string, bool) {
	sizes := map[string]map[string]string{
		"480p":  {"16:9": "832*480", "9:16": "480*832", "1:1": "624*624"},
		"720p":  {"16:9": "1280*720", "9:16": "720*1280", "1:1": "960*960", "4:3": "1088*832", "3:4": "832*1088"},
		"1080p": {"16:9": "1920*1080", "9:16": "1080*1920", "1:1": "1440*1440", "4:3": "1632*1248", "3:4": "1248*1632"},
	}
	if ratio == "" {
		ratio = "16:9"
	}
	s, ok := sizes[strings.ToLower(resolution)][ratio]
	return s, ok
}

// KeyFrameModel reports whether a model is a first-and-last-frame model (…-kf2v-…), sent to
// /services/aigc/image2video/video-synthesis rather than /services/aigc/video-generation/video-synthesis.
func KeyFrameModel(model string) bool { return strings.Contains(model, "kf2v") }

// Submit starts an image or video task.
func (a *Adapter) Submit(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	unsupported := func(msg string) error {
		return &upstream.Error{Class: upstream.ClassCapability, Upstream: a.cfg.Name, Message: msg}
	}
	var path string
	var body map[string]any
	if req.Media == upstream.MediaImage {
		in := req.Image
		if len(in.ReferenceImages) > 0 || len(in.Image) > 0 || (in.Resolution != "" && in.Resolution != "1k") {
			return nil, unsupported("references or a large size")
		}
		w, h := upstream.Pixels(in.Ratio, "1k")
		path = "/services/aigc/text2image/image-synthesis"
		body = map[string]any{"model": a.cfg.Model, "input": map[string]any{"prompt": in.Prompt},
			"parameters": map[string]any{"size": fmt.Sprintf("%d*%d", w, h), "n": 1, "watermark": false}}
	} else {
		in := req.Video
		if len(in.Videos) > 0 || len(in.Audios) > 0 || len(in.Images) > 2 {
			return nil, unsupported("reference videos, audios or more than two images")
		}
		input := map[string]any{"prompt": in.Prompt}
		params := map[string]any{"duration": in.Duration, "watermark": false}
		path = "/services/aigc/video-generation/video-synthesis"
		switch {
		case KeyFrameModel(a.cfg.Model):
			// First-and-last-frame models (wan2.2-kf2v-flash, wan2.1-kf2v-plus) have their own endpoint, as
			// in the SDK (video_synthesis.py: a model naming kf2v is sent to task image2video); 5 s only,
			// silent.
			if len(in.Images) != 2 || in.Duration != 5 || in.GenerateAudio {
				return nil, unsupported("a first/last-frame model takes two images, 5 s, no audio")
			}
			path = "/services/aigc/image2video/video-synthesis"
			input["first_frame_url"], input["last_frame_url"] = in.Images[0], in.Images[1]
			params["resolution"] = strings.ToUpper(in.Resolution)
		case len(in.Images) == 0:
			size, ok := videoSize(in.Resolution, in.Ratio)
			if !ok {
				return nil, unsupported("resolution " + in.Resolution + " at " + in.Ratio)
			}
			params["size"] = size
		case len(in.Images) == 1:
			input["img_url"] = in.Images[0]
			params["resolution"] = strings.ToUpper(in.Resolution)
		default:
			return nil, unsupported("a first and last frame need a kf2v model")
		}
		if a.cfg.Has(upstream.CapGenerateAudio) && !KeyFrameModel(a.cfg.Model) {
			params["audio"] = in.GenerateAudio
		}
		body = map[string]any{"model": a.cfg.Model, "input": input, "parameters": params}
	}
	var out answer
	if err := a.http.Do(ctx, http.MethodPost, a.cfg.BaseURL+path, a.header(true), body, &out); err != nil {
		return nil, err
	}
	if out.Output.TaskID == "" {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "no task_id", Err: upstream.ErrUnknownOutcome}
	}
	return &upstream.Task{ID: out.Output.TaskID, Status: upstream.TaskQueued}, nil
}

// Poll returns the state of a task.
func (a *Adapter) Poll(ctx context.Context, _ upstream.Media, id string) (*upstream.Task, error) {
	var out answer
	if err := a.http.Do(ctx, http.MethodGet, a.cfg.BaseURL+"/tasks/"+url.PathEscape(id), a.header(false), nil, &out); err != nil {
		return nil, err
	}
	t := &upstream.Task{ID: id}
	switch out.Output.TaskStatus {
	case "PENDING":
		t.Status = upstream.TaskQueued
	case "RUNNING":
		t.Status = upstream.TaskRunning
	case "SUCCEEDED":
		t.Status, t.Progress = upstream.TaskSucceeded, 100
		if out.Output.VideoURL != "" {
			t.Outputs = append(t.Outputs, upstream.Output{URL: out.Output.VideoURL})
		}
		for _, r := range out.Output.Results {
			if r.URL != "" {
				t.Outputs = append(t.Outputs, upstream.Output{URL: r.URL})
			}
		}
	case "CANCELED":
		t.Status = upstream.TaskCancelled
	case "FAILED", "UNKNOWN":
		t.Status = upstream.TaskFailed
		t.Err = classifyCode(0, out.Output.Code, out.Output.Message)
		t.Err.Upstream = a.cfg.Name
	default:
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "unknown task_status " + out.Output.TaskStatus}
	}
	return t, nil
}

// Cancel cancels a pending task (DashScope cannot cancel a running one).
func (a *Adapter) Cancel(ctx context.Context, _ upstream.Media, id string) error {
	return a.http.Do(ctx, http.MethodPost, a.cfg.BaseURL+"/tasks/"+url.PathEscape(id)+"/cancel", a.header(false), nil, nil)
}

// Open downloads a result URL (signed: no key is sent).
func (a *Adapter) Open(ctx context.Context, out upstream.Output) (io.ReadCloser, error) {
	return a.http.Download(ctx, out.URL, nil)
}

// Probe lists one task: it checks the key and the account, generating nothing.
func (a *Adapter) Probe(ctx context.Context) error {
	var out json.RawMessage
	return a.http.Do(ctx, http.MethodGet, a.cfg.BaseURL+"/tasks?page_no=1&page_size=1", a.header(false), nil, &out)
}

func classify(status int, _ http.Header, body []byte) *upstream.Error {
	var a answer
	if json.Unmarshal(body, &a) != nil || a.Code == "" {
		return &upstream.Error{Class: upstream.StatusClass(status), Message: string(body[:min(len(body), 200)])}
	}
	return classifyCode(status, a.Code, a.Message)
}

// classifyCode maps a DashScope error code.
func classifyCode(status int, code, msg string) *upstream.Error {
	e := &upstream.Error{Code: code, Message: msg, Class: upstream.StatusClass(status)}
	switch {
	case code == "DataInspectionFailed" || code == "IPInfringementSuspect" || strings.HasPrefix(code, "DataInspection"):
		e.Class = upstream.ClassRefused
	case code == "Arrearage":
		e.Class = upstream.ClassUnpaid
	case code == "InvalidApiKey" || strings.HasPrefix(code, "AccessDenied"):
		e.Class = upstream.ClassRevoked
	case strings.HasPrefix(code, "Throttling"):
		e.Class = upstream.ClassTransient
	case status == 0:
		e.Class = upstream.ClassOther
	}
	return e
}
