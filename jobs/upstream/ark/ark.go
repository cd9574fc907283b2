// Package ark is the upstream protocol `ark`: Volcengine Ark (火山方舟), and BytePlus ModelArk (the
// same API on another host: base_url https://ark.ap-southeast.bytepluses.com/api/v3).
//
// Images are Seedream (doubao-seedream-*) through POST {base_url}/images/generations, one synchronous
// call: model, prompt, image (reference pictures as data URLs; one string or a list), size (WIDTHxHEIGHT),
// watermark false, response_format b64_json. Videos are Seedance (doubao-seedance-*) tasks: POST
// {base_url}/contents/generations/tasks with content items (type text; type image_url with role
// first_frame, last_frame or reference_image; video_url with role reference_video; audio_url with role
// reference_audio) and the parameters duration, resolution, ratio, generate_audio and watermark; GET
// {base_url}/contents/generations/tasks/{id} polls it (queued, running, succeeded, failed, cancelled,
// expired; content.video_url when succeeded, an URL valid for 24 hours); DELETE on the same path cancels
// a queued task (a running one cannot be cancelled; an ended one is deleted). Every call carries
// Authorization: Bearer <api_key>. Ark does not let the client name a task: a submission whose answer was
// lost cannot be found again (the job fails with its refund). Ark reports no progress figure.
//
// Errors are {"error": {"code", "message", "param", "type"}}: 401 AuthenticationError (revoked); 403
// AccountOverdueError (unpaid) or AccessDenied (revoked); 429 RateLimitExceeded and ServerOverloaded
// (transient), QuotaExceeded (unpaid); 400 *SensitiveContentDetected* (a content refusal); 5xx transient.
// A failed task's error.code OutputVideoSensitiveContentDetected / OutputImageSensitiveContentDetected
// is a refusal of the result.
//
// Pages followed (read 2026):
//   - the official Go SDK github.com/volcengine/volcengine-go-sdk, service/arkruntime/content_generation.go
//     and service/arkruntime/model/content_generation.go, images.go, error.go (request and answer fields,
//     paths, statuses);
//   - https://www.volcengine.com/docs/82379/1520757 (创建视频生成任务 API) and
//     https://www.volcengine.com/docs/82379/1541523 (图片生成 API);
//   - https://docs.byteplus.com/en/docs/ModelArk/1299023 (ModelArk common error codes).
//
// Checked again against the SDK snapshot of 2026-08-21 (commit cf20b61): CreateContentGenerationTaskRequest
// carries duration, resolution, ratio, generate_audio and watermark at the top level beside content;
// the task statuses are queued, running, succeeded, failed and cancelled; GenerateImagesRequest takes
// image (one string or a list), size, watermark and response_format, as sent here.
package ark

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"

	"studio/jobs/upstream"
	"studio/models/media"
)

// Protocol is the name of the protocol in the upstreams file.
const Protocol upstream.Protocol = "ark"

// DefaultBaseURL is Volcengine Ark's Beijing region.
const DefaultBaseURL = "https://ark.cn-beijing.volces.com/api/v3"

func init() {
	upstream.RegisterProtocol(Protocol, upstream.ProtocolSpec{
		Capabilities: map[upstream.Media][]upstream.Capability{
			upstream.MediaImage: {upstream.CapReferenceImages, upstream.CapLarge},
			upstream.MediaVideo: {upstream.CapImages, upstream.CapVideos, upstream.CapAudios, upstream.CapGenerateAudio},
		},
		DefaultBaseURL: DefaultBaseURL,
		Required:       []string{"api_key", "model"},
		New:            func(cfg *upstream.Config) (upstream.TaskAdapter, error) { return New(cfg), nil },
	})
}

// Adapter talks to one Ark upstream.
type Adapter struct {
	cfg  *upstream.Config
	http *upstream.HTTP
}

// New returns the adapter of an upstream.
func New(cfg *upstream.Config) *Adapter {
	return &Adapter{cfg: cfg, http: upstream.NewHTTP(cfg.Name, classify)}
}

func (a *Adapter) header() http.Header {
	return http.Header{"Authorization": {"Bearer " + a.cfg.APIKey}}
}

// imageRequest is the body of POST /images/generations.
type imageRequest struct {
	Model          string `json:"model"`
	Prompt         string `json:"prompt"`
	Image          any    `json:"image,omitempty"`
	Size           string `json:"size,omitempty"`
	ResponseFormat string `json:"response_format"`
	Watermark      bool   `json:"watermark"`
}

type imageAnswer struct {
	Data []struct {
		URL     string `json:"url"`
		B64JSON string `json:"b64_json"`
	} `json:"data"`
	Error *apiError `json:"error"`
}

// contentItem is one item of a video task's content.
type contentItem struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *urlOf `json:"image_url,omitempty"`
	VideoURL *urlOf `json:"video_url,omitempty"`
	AudioURL *urlOf `json:"audio_url,omitempty"`
	Role     string `json:"role,omitempty"`
}

type urlOf struct {
	URL string `json:"url"`
}

// taskRequest is the body of POST /contents/generations/tasks.
type taskRequest struct {
	Model         string        `json:"model"`
	Content       []contentItem `json:"content"`
	Duration      int           `json:"duration,omitempty"`
	Resolution    string        `json:"resolution,omitempty"`
	Ratio         string        `json:"ratio,omitempty"`
	GenerateAudio *bool         `json:"generate_audio,omitempty"`
	Watermark     bool          `json:"watermark"`
}

type taskAnswer struct {
	ID      string    `json:"id"`
	Status  string    `json:"status"`
	Error   *apiError `json:"error"`
	Content struct {
		VideoURL string `json:"video_url"`
	} `json:"content"`
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

// dataURL is a picture as the data URL Ark accepts in image.
func dataURL(b []byte) string {
	mime := "image/png"
	if k, err := media.Detect(b); err == nil {
		mime = k.MIME
	}
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// Submit generates an image (one call: the task answers succeeded) or starts a video task.
func (a *Adapter) Submit(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	if req.Media == upstream.MediaImage {
		return a.image(ctx, req)
	}
	return a.video(ctx, req)
}

func (a *Adapter) image(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	in := req.Image
	body := imageRequest{Model: a.cfg.Model, Prompt: in.Prompt, ResponseFormat: "b64_json"}
	body.Size = Size(in.Ratio, in.Resolution)
	switch refs := append(append([][]byte{}, in.ReferenceImages...), nonEmpty(in.Image)...); len(refs) {
	case 0:
	case 1:
		body.Image = dataURL(refs[0])
	default:
		list := make([]string, len(refs))
		for i, r := range refs {
			list[i] = dataURL(r)
		}
		body.Image = list
	}
	var out imageAnswer
	if err := a.http.Do(ctx, http.MethodPost, a.cfg.BaseURL+"/images/generations", a.header(), body, &out); err != nil {
		return nil, err
	}
	if out.Error != nil {
		return nil, classifyCode(a.cfg.Name, http.StatusOK, out.Error)
	}
	if len(out.Data) == 0 {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "no image in the answer"}
	}
	o := upstream.Output{URL: out.Data[0].URL}
	if out.Data[0].B64JSON != "" {
		b, err := base64.StdEncoding.DecodeString(out.Data[0].B64JSON)
		if err != nil {
			return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "unreadable image", Err: err}
		}
		o = upstream.Output{Data: b}
	}
	return &upstream.Task{ID: "image:" + req.Ref, Status: upstream.TaskSucceeded, Progress: 100, Outputs: []upstream.Output{o}}, nil
}

func nonEmpty(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	return [][]byte{b}
}

// Size is the size sent for a ratio and resolution: the area of 1024x1024, 2048x2048 or 4096x4096 (1k,
// 2k, 4k) at the ratio, each side a multiple of 16 (Seedream asks for an area between 1280x720 and
// 4096x4096 and a ratio between 1:16 and 16:1).
func Size(ratio, resolution string) string {
	side := 1024.0
	switch resolution {
	case "2k":
		side = 2048
	case "4k":
		side = 4096
	}
	w, h := 1.0, 1.0
	if ratio != "" {
		if _, err := fmt.Sscanf(ratio, "%g:%g", &w, &h); err != nil || w <= 0 || h <= 0 {
			w, h = 1, 1
		}
	}
	r := w / h
	round := func(v float64) int { return int(math.Floor(v/16)) * 16 }
	return fmt.Sprintf("%dx%d", round(side*math.Sqrt(r)), round(side/math.Sqrt(r)))
}

// videoBody builds the task request of a video.
func (a *Adapter) videoBody(in upstream.VideoRequest) taskRequest {
	body := taskRequest{Model: a.cfg.Model, Duration: in.Duration, Resolution: strings.ToLower(in.Resolution), Ratio: in.Ratio}
	if body.Model == "" {
		body.Model = in.Tier
	}
	body.Content = append(body.Content, contentItem{Type: "text", Text: in.Prompt})
	switch n := len(in.Images); {
	case n == 1:
		body.Content = append(body.Content, contentItem{Type: "image_url", ImageURL: &urlOf{in.Images[0]}, Role: "first_frame"})
	case n == 2:
		body.Content = append(body.Content,
			contentItem{Type: "image_url", ImageURL: &urlOf{in.Images[0]}, Role: "first_frame"},
			contentItem{Type: "image_url", ImageURL: &urlOf{in.Images[1]}, Role: "last_frame"})
	default:
		for _, u := range in.Images {
			body.Content = append(body.Content, contentItem{Type: "image_url", ImageURL: &urlOf{u}, Role: "reference_image"})
		}
	}
	for _, u := range in.Videos {
		body.Content = append(body.Content, contentItem{Type: "video_url", VideoURL: &urlOf{u}, Role: "reference_video"})
	}
	for _, u := range in.Audios {
		body.Content = append(body.Content, contentItem{Type: "audio_url", AudioURL: &urlOf{u}, Role: "reference_audio"})
	}
	if a.cfg.Has(upstream.CapGenerateAudio) {
		// Models that make sound do so by default: say what the request wants either way.
		v := in.GenerateAudio
		body.GenerateAudio = &v
	}
	return body
}

func (a *Adapter) video(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	var out taskAnswer
	if err := a.http.Do(ctx, http.MethodPost, a.cfg.BaseURL+"/contents/generations/tasks", a.header(), a.videoBody(req.Video), &out); err != nil {
		return nil, err
	}
	if out.ID == "" {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "no task id in the answer", Err: upstream.ErrUnknownOutcome}
	}
	return &upstream.Task{ID: out.ID, Status: upstream.TaskQueued}, nil
}

// Poll returns the state of a video task.
func (a *Adapter) Poll(ctx context.Context, m upstream.Media, id string) (*upstream.Task, error) {
	var out taskAnswer
	if err := a.http.Do(ctx, http.MethodGet, a.cfg.BaseURL+"/contents/generations/tasks/"+url.PathEscape(id), a.header(), nil, &out); err != nil {
		return nil, err
	}
	t := &upstream.Task{ID: id}
	switch out.Status {
	case "queued":
		t.Status = upstream.TaskQueued
	case "running":
		t.Status = upstream.TaskRunning
	case "succeeded":
		t.Status, t.Progress = upstream.TaskSucceeded, 100
		if out.Content.VideoURL == "" {
			t.Status = upstream.TaskFailed
			t.Err = &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "succeeded without a video_url"}
		}
		t.Outputs = []upstream.Output{{URL: out.Content.VideoURL}}
	case "cancelled":
		t.Status = upstream.TaskCancelled
	default: // failed, expired
		t.Status = upstream.TaskFailed
		e := out.Error
		if e == nil {
			e = &apiError{Code: out.Status}
		}
		t.Err = classifyCode(a.cfg.Name, 0, e)
	}
	return t, nil
}

// Cancel cancels a queued task or deletes an ended one (Ark cannot cancel a running task).
func (a *Adapter) Cancel(ctx context.Context, m upstream.Media, id string) error {
	if strings.HasPrefix(id, "image:") {
		return nil
	}
	return a.http.Do(ctx, http.MethodDelete, a.cfg.BaseURL+"/contents/generations/tasks/"+url.PathEscape(id), a.header(), nil, nil)
}

// Open downloads a result URL (a signed URL: no key is sent).
func (a *Adapter) Open(ctx context.Context, out upstream.Output) (io.ReadCloser, error) {
	return a.http.Download(ctx, out.URL, nil)
}

// Probe lists one video task: it checks the key and the account without generating anything.
func (a *Adapter) Probe(ctx context.Context) error {
	var out json.RawMessage
	return a.http.Do(ctx, http.MethodGet, a.cfg.BaseURL+"/contents/generations/tasks?page_num=1&page_size=1", a.header(), nil, &out)
}

// classify maps an Ark error answer to a class.
func classify(status int, _ http.Header, body []byte) *upstream.Error {
	var eb struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &eb) != nil || eb.Error == nil {
		return &upstream.Error{Class: upstream.StatusClass(status), Message: string(body[:min(len(body), 200)])}
	}
	return classifyCode("", status, eb.Error)
}

// classifyCode maps an Ark error code (of an answer or of a failed task) to a class.
func classifyCode(name string, status int, e *apiError) *upstream.Error {
	out := &upstream.Error{Upstream: name, Status: status, Code: e.Code, Message: e.Message, Class: upstream.StatusClass(status)}
	code := e.Code
	switch {
	case strings.Contains(code, "SensitiveContentDetected"):
		out.Class = upstream.ClassRefused
	case code == "AccountOverdueError" || code == "QuotaExceeded" || strings.HasPrefix(code, "AccountOverdue"):
		out.Class = upstream.ClassUnpaid
	case code == "AuthenticationError" || code == "AccessDenied":
		out.Class = upstream.ClassRevoked
	case code == "RateLimitExceeded" || code == "ServerOverloaded" || code == "InternalServiceError":
		out.Class = upstream.ClassTransient
	case status == http.StatusNotFound || strings.Contains(code, "NotFound") && status != 0:
		out.Class = upstream.ClassCapability
	case status == 0:
		out.Class = upstream.ClassOther
	}
	return out
}
