// Package fal is the upstream protocol `fal`: the fal.ai queue (any model id on fal), base_url
// https://queue.fal.run. Every call carries Authorization: Key <api_key>.
//
// A generation is a queue request: POST {base_url}/{model id} with the model's input as the JSON body
// answers {request_id, status IN_QUEUE, status_url, response_url, cancel_url}. The status, result and
// cancel URLs name only the owner and the app of the model id ("fal-ai/flux/dev" → fal-ai/flux; the
// workflows/ and comfy/ namespaces keep their prefix) and the fal docs say to use the URLs of the answer:
// studio stores {owner}/{app}/requests/{request_id} read from status_url (built as the official JS client
// builds it when status_url is on another host), before the first poll. GET .../status?logs=1 polls it
// (IN_QUEUE with queue_position, IN_PROGRESS with logs, COMPLETED with logs and metrics); once COMPLETED,
// GET response_url returns the model's output (images[].url, image.url or video.url, files on fal's CDN
// downloaded without the key) or, for a failed request, an error status with detail and error_type. PUT
// cancel_url cancels (202 CANCELLATION_REQUESTED; a queued request is removed, a running one signalled;
// 400 ALREADY_COMPLETED is not an error). Progress is the last tqdm percentage a runner printed in its
// logs, 0 otherwise. fal does not let the client name a request: a submission whose answer was lost
// fails with its refund.
//
// Inputs differ per model; studio sends what the common models share: for an image prompt, image_size
// {width, height} (the ratio at 1k) and num_images 1; for a video prompt, duration (seconds, as the string
// most fal video models take), aspect_ratio, resolution (480p, 720p, 1080p) when given, and one first frame
// as image_url. fal serves text-to-video and image-to-video on separate model ids: declare `images` for an
// image-to-video model id, which then takes only requests with a picture (a request without one is not
// served there: routing moves on to a text-to-video upstream).
//
// Errors: 401 (revoked); 403 "User is locked. Reason: Exhausted balance" (unpaid), other 403 (revoked: an
// admin lock, a key without the permission); 404 an unknown model (capability); 422 validation errors,
// of which type content_policy_violation is a content refusal (the same on the result of a completed
// request); 429 and 5xx transient (Retry-After honoured). A completed request whose result is an error
// (a 5xx with an error_type such as runner_server_error, a 4xx) failed; a 429 or a 5xx without
// error_type on the result is the queue's own and the request is polled again.
//
// Pages followed (read 2026):
//   - https://fal.ai/docs/api-reference/inference-api (authentication Key, model ids and paths, "use the
//     status_url, response_url and cancel_url fields", 202 while queued, 200 when complete);
//   - https://docs.fal.ai/documentation/model-apis/inference/queue (lifecycle IN_QUEUE, IN_PROGRESS,
//     COMPLETED; queue_position, logs=1, metrics) and https://fal.ai/docs/inference-api/queue/cancel;
//   - https://docs.fal.ai/documentation/serverless/reliability/retries (error_type, X-Fal-Error-Type) and
//     fal's error reference (content_policy_violation, 422);
//   - the official JS client github.com/fal-ai/fal-js, libs/client/src/queue.ts (submit, status with
//     logs, result, PUT cancel, {owner}/{alias} paths), utils.ts (parseEndpointId, namespaces),
//     request.ts (Authorization: Key), response.ts (ValidationError on 422), types/common.ts (QueueStatus).
package fal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"studio/jobs/upstream"
)

// Protocol is the name of the protocol in the upstreams file.
const Protocol upstream.Protocol = "fal"

// DefaultBaseURL is fal's queue.
const DefaultBaseURL = "https://queue.fal.run"

func init() {
	upstream.RegisterProtocol(Protocol, upstream.ProtocolSpec{
		Capabilities: map[upstream.Media][]upstream.Capability{
			upstream.MediaImage: {},
			upstream.MediaVideo: {upstream.CapImages},
		},
		DefaultBaseURL: DefaultBaseURL,
		Required:       []string{"api_key", "model"},
		New:            New,
	})
}

// Adapter talks to one fal upstream.
type Adapter struct {
	cfg  *upstream.Config
	http *upstream.HTTP
	app  string // {namespace/}{owner}/{app} of the model id
}

var (
	modelID = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$`)
	// taskID is {namespace/}owner/app/requests/{request_id}.
	taskID = regexp.MustCompile(`^((?:workflows/|comfy/)?[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/requests/([A-Za-z0-9-]+)$`)
)

// New returns the adapter of an upstream; the model must be a fal model id (owner/app[/path]).
func New(cfg *upstream.Config) (upstream.TaskAdapter, error) {
	if !modelID.MatchString(cfg.Model) || strings.Contains(cfg.Model, "..") {
		return nil, fmt.Errorf("model %q is not a fal model id (owner/app or owner/app/path)", cfg.Model)
	}
	return &Adapter{cfg: cfg, http: upstream.NewHTTP(cfg.Name, classify), app: App(cfg.Model)}, nil
}

// App returns the part of a model id that the status, result and cancel URLs use, as the JS client's
// parseEndpointId does: owner/app, with the workflows/ or comfy/ namespace kept.
func App(model string) string {
	parts := strings.Split(model, "/")
	if (parts[0] == "workflows" || parts[0] == "comfy") && len(parts) >= 3 {
		return strings.Join(parts[:3], "/")
	}
	return strings.Join(parts[:min(2, len(parts))], "/")
}

func (a *Adapter) header() http.Header {
	return http.Header{"Authorization": {"Key " + a.cfg.APIKey}}
}

type queued struct {
	RequestID     string `json:"request_id"`
	Status        string `json:"status"`
	StatusURL     string `json:"status_url"`
	ResponseURL   string `json:"response_url"`
	CancelURL     string `json:"cancel_url"`
	QueuePosition *int   `json:"queue_position"`
	Logs          []struct {
		Message string `json:"message"`
	} `json:"logs"`
}

// Input returns the model input of a task request.
func Input(req upstream.TaskRequest) (map[string]any, error) {
	if req.Media == upstream.MediaImage {
		in := req.Image
		if len(in.ReferenceImages) > 0 || len(in.Image) > 0 || len(in.Mask) > 0 || in.Background == "transparent" {
			return nil, fmt.Errorf("reference pictures, masks or transparency")
		}
		if in.Resolution != "" && in.Resolution != "1k" {
			return nil, fmt.Errorf("the resolution %s", in.Resolution)
		}
		w, h := upstream.Pixels(in.Ratio, "1k")
		return map[string]any{"prompt": in.Prompt, "image_size": map[string]int{"width": w, "height": h}, "num_images": 1}, nil
	}
	in := req.Video
	if len(in.Videos) > 0 || len(in.Audios) > 0 || len(in.Images) > 1 {
		return nil, fmt.Errorf("reference videos, audios or more than one picture")
	}
	out := map[string]any{"prompt": in.Prompt}
	if in.Duration > 0 {
		out["duration"] = fmt.Sprint(in.Duration)
	}
	if in.Ratio != "" {
		out["aspect_ratio"] = in.Ratio
	}
	if in.Resolution != "" {
		out["resolution"] = strings.ToLower(in.Resolution)
	}
	if len(in.Images) == 1 {
		out["image_url"] = in.Images[0]
	}
	return out, nil
}

// Submit puts a request in the queue.
func (a *Adapter) Submit(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	input, err := Input(req)
	if err == nil && req.Media == upstream.MediaVideo && a.cfg.Has(upstream.CapImages) && len(req.Video.Images) == 0 {
		err = errors.New("a video without a picture to an image-to-video model")
	}
	if err != nil {
		return nil, &upstream.Error{Class: upstream.ClassCapability, Upstream: a.cfg.Name, Message: "the fal protocol cannot send " + err.Error()}
	}
	var out queued
	if err := a.http.Do(ctx, http.MethodPost, a.cfg.BaseURL+"/"+a.cfg.Model, a.header(), input, &out); err != nil {
		return nil, err
	}
	id := a.taskID(out)
	if id == "" {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "no usable request_id in the answer", Err: upstream.ErrUnknownOutcome}
	}
	return &upstream.Task{ID: id, Status: upstream.TaskQueued}, nil
}

// taskID is the stored name of a queued request: the path of its status_url under base_url without
// /status, or the path the JS client builds.
func (a *Adapter) taskID(q queued) string {
	if rest, ok := strings.CutPrefix(q.StatusURL, a.cfg.BaseURL+"/"); ok {
		if id, ok := strings.CutSuffix(rest, "/status"); ok {
			if m := taskID.FindStringSubmatch(id); m != nil && m[2] == q.RequestID {
				return id
			}
		}
	}
	id := a.app + "/requests/" + q.RequestID
	if q.RequestID == "" || !taskID.MatchString(id) {
		return ""
	}
	return id
}

func (a *Adapter) url(id string) (string, error) {
	if !taskID.MatchString(id) {
		return "", &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Status: http.StatusNotFound, Message: "not a fal request: " + id}
	}
	return a.cfg.BaseURL + "/" + id, nil
}

// progress is the tqdm bar a runner prints: "45%|████▌     | 9/20 [...]".
var progress = regexp.MustCompile(`(\d+)%\|.*\|\s*\d+/\d+`)

// Poll returns the state of a queue request; a completed one's result is fetched at once.
func (a *Adapter) Poll(ctx context.Context, m upstream.Media, id string) (*upstream.Task, error) {
	u, err := a.url(id)
	if err != nil {
		return nil, err
	}
	var st queued
	if err := a.http.Do(ctx, http.MethodGet, u+"/status?logs=1", a.header(), nil, &st); err != nil {
		return nil, err
	}
	t := &upstream.Task{ID: id}
	for i := len(st.Logs) - 1; i >= 0; i-- {
		if mm := progress.FindStringSubmatch(st.Logs[i].Message); mm != nil {
			fmt.Sscan(mm[1], &t.Progress)
			t.Progress = min(max(t.Progress, 0), 99)
			break
		}
	}
	switch st.Status {
	case "IN_QUEUE":
		t.Status = upstream.TaskQueued
		return t, nil
	case "IN_PROGRESS":
		t.Status = upstream.TaskRunning
		return t, nil
	case "COMPLETED":
	default:
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "unknown status " + st.Status}
	}
	var result json.RawMessage
	if err := a.http.Do(ctx, http.MethodGet, u, a.header(), nil, &result); err != nil {
		var ue *upstream.Error
		switch {
		case !errors.As(err, &ue) || ue.Status == 0 || ue.Class == upstream.ClassRevoked || ue.Class == upstream.ClassUnpaid:
			return nil, err // not reached, or the key: poll again
		case ue.Class == upstream.ClassTransient && ue.Code == "":
			return nil, err // a 429 or a gateway's 5xx, not the request's own error: poll again
		}
		// The request completed with an error (a runner error with its error_type, a refusal, a
		// cancellation): its result is the error.
		t.Status, t.Err = upstream.TaskFailed, ue
		if ue.Class == upstream.ClassTransient {
			ue.Class = upstream.ClassOther
		}
		return t, nil
	}
	file := OutputURL(result)
	if file == "" {
		t.Status = upstream.TaskFailed
		t.Err = &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "completed without an image or a video: " + string(result[:min(len(result), 200)])}
		return t, nil
	}
	t.Status, t.Progress, t.Outputs = upstream.TaskSucceeded, 100, []upstream.Output{{URL: file}}
	return t, nil
}

// OutputURL reads the first file of a model's output: images[].url, image.url or video.url.
func OutputURL(raw json.RawMessage) string {
	var out struct {
		Images []struct {
			URL string `json:"url"`
		} `json:"images"`
		Image *struct {
			URL string `json:"url"`
		} `json:"image"`
		Video *struct {
			URL string `json:"url"`
		} `json:"video"`
	}
	if json.Unmarshal(raw, &out) != nil {
		return ""
	}
	switch {
	case out.Video != nil && out.Video.URL != "":
		return out.Video.URL
	case len(out.Images) > 0 && out.Images[0].URL != "":
		return out.Images[0].URL
	case out.Image != nil:
		return out.Image.URL
	}
	return ""
}

// Cancel asks fal to cancel a queue request (PUT cancel_url); a request that already ended or is unknown
// is not an error.
func (a *Adapter) Cancel(ctx context.Context, m upstream.Media, id string) error {
	u, err := a.url(id)
	if err != nil {
		return nil
	}
	err = a.http.Do(ctx, http.MethodPut, u+"/cancel", a.header(), nil, nil)
	var ue *upstream.Error
	if errors.As(err, &ue) && (ue.Status == http.StatusBadRequest || ue.Status == http.StatusNotFound) {
		return nil // ALREADY_COMPLETED, NOT_FOUND
	}
	return err
}

// Open downloads an output file (on fal's CDN: no key is sent).
func (a *Adapter) Open(ctx context.Context, out upstream.Output) (io.ReadCloser, error) {
	if u, err := url.Parse(out.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "not a file URL: " + out.URL}
	}
	return a.http.Download(ctx, out.URL, nil)
}

// ProbeRequestID names no request: the probe asks for its status, which a valid key gets as 404.
const ProbeRequestID = "00000000-0000-0000-0000-000000000000"

// Probe asks the queue for the status of a request that does not exist: 404 says the key is accepted
// and the queue answers; 401 or 403 says it is not. Nothing is generated.
func (a *Adapter) Probe(ctx context.Context) error {
	err := a.http.Do(ctx, http.MethodGet, a.cfg.BaseURL+"/"+a.app+"/requests/"+ProbeRequestID+"/status", a.header(), nil, nil)
	var ue *upstream.Error
	if errors.As(err, &ue) && ue.Status == http.StatusNotFound {
		return nil
	}
	return err
}

// classify maps a fal error answer ({"detail": "..."} or {"detail": [{loc, msg, type}]}) to a class.
func classify(status int, h http.Header, body []byte) *upstream.Error {
	out := &upstream.Error{Class: upstream.StatusClass(status)}
	var eb struct {
		Detail    json.RawMessage `json:"detail"`
		ErrorType string          `json:"error_type"`
	}
	_ = json.Unmarshal(body, &eb)
	var text string
	var items []struct {
		Msg  string `json:"msg"`
		Type string `json:"type"`
	}
	if json.Unmarshal(eb.Detail, &text) != nil {
		_ = json.Unmarshal(eb.Detail, &items)
	}
	out.Code = eb.ErrorType
	if out.Code == "" {
		out.Code = h.Get("X-Fal-Error-Type")
	}
	out.Message = text
	for _, it := range items {
		out.Message = strings.TrimPrefix(out.Message+"; "+it.Msg, "; ")
		if it.Type == "content_policy_violation" {
			out.Code, out.Class = it.Type, upstream.ClassRefused
		}
	}
	if out.Message == "" {
		out.Message = string(body[:min(len(body), 200)])
	}
	lower := strings.ToLower(text)
	switch {
	case out.Class == upstream.ClassRefused:
	case eb.ErrorType == "content_policy_violation":
		out.Class = upstream.ClassRefused
	case status == http.StatusForbidden && (strings.Contains(lower, "exhausted balance") || strings.Contains(lower, "top_up") || strings.Contains(lower, "top up")):
		out.Class = upstream.ClassUnpaid
	}
	return out
}
