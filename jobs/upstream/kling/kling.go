// Package kling is the upstream protocol `kling`: the Kling AI API of Kuaishou (可灵), base_url
// https://api-beijing.klingai.com (default) or https://api-singapore.klingai.com.
//
// Every call carries Authorization: Bearer <JWT>, a JWT (header {"alg":"HS256","typ":"JWT"}) signed
// with HS256 by the secret key (secret_key) whose claims are iss = the access key (api_key), exp = now +
// 1800 s, nbf = now - 5 s. Images: POST /v1/images/generations {model_name, prompt, image (a reference,
// Base64 without a data: prefix), n 1, aspect_ratio, resolution 1k|2k}, polled with GET
// /v1/images/generations/{task_id} (task_result.images[].url). Videos: POST /v1/videos/text2video
// {model_name, prompt, mode std|pro, aspect_ratio 16:9|9:16|1:1, duration "5"|"10", external_task_id} or
// POST /v1/videos/image2video {model_name, image, image_tail (URL, or Base64 without prefix), prompt,
// mode, duration, external_task_id}, polled with GET /v1/videos/{kind}/{task_id} (task_status submitted,
// processing, succeed, failed; task_result.videos[].url, kept 30 days). The client names the video task
// (external_task_id = studio's reference) and GET /v1/videos/{kind}/{external_task_id} finds it: a
// submission whose answer was lost is found again, never sent twice. Kling has no cancel call: a
// cancelled video is left to end at Kling and its result ignored. Kling reports no progress figure.
// 720p maps to mode std, 1080p to mode pro; only 5 and 10 s videos exist (another length is not
// served: routing moves on). Text-to-video model names differ from image ones (kling-v2-1-master, not
// kling-v2-1).
//
// Answers are {code, message, request_id, data}; codes (HTTP status): 1000-1004 authentication (401:
// revoked), 1100 account exception (429: revoked, the operator must look), 1101 arrears and 1102 resource
// pack depleted or expired (429: unpaid), 1103 no permission for the API or model (403: revoked), 1200-1201
// invalid parameters (400), 1202-1203 method or resource not found (404), 1300 platform policy and 1301
// content security policy (400: a refusal), 1302 rate and 1303 concurrency limit (429: transient), 1304 IP
// whitelist policy (429: revoked, not retried), 5000-5002 server error, unavailable, time-out (transient).
//
// Read (2026): Kling's API reference as copied in public repositories, WHQ25/rawgenai
// docs/research/kling/common-info.md (JWT, error codes), text-to-video.md, image-to-video.md,
// image-generation.md, account-costs.md (the probe: GET /account/costs?start_time&end_time in ms), and
// inference-sh/grid api/klingai/docs/00-general.md; the mirrored pages of
// https://app.klingai.com/global/dev/document-api/apiReference/commonInfo and .../rateLimits (1303).
// Kling publishes no official SDK. Silent, assumed: how external_task_id is queried (taken as the path
// {id}, as the reference lists it among the path parameters) and the answer for an unknown one (404 or
// 1203); which models allow image_tail in std mode (the capability map was not checked).
package kling

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"studio/jobs/upstream"
)

// Protocol is the name of the protocol in the upstreams file.
const Protocol upstream.Protocol = "kling"

// DefaultBaseURL is Kling's API host in China.
const DefaultBaseURL = "https://api-beijing.klingai.com"

func init() {
	upstream.RegisterProtocol(Protocol, upstream.ProtocolSpec{
		Capabilities: map[upstream.Media][]upstream.Capability{
			upstream.MediaImage: {upstream.CapReferenceImages, upstream.CapLarge},
			upstream.MediaVideo: {upstream.CapImages},
		},
		DefaultBaseURL: DefaultBaseURL,
		Required:       []string{"api_key", "secret_key", "model"},
		New:            func(cfg *upstream.Config) (upstream.TaskAdapter, error) { return New(cfg), nil },
	})
}

// Adapter talks to one Kling upstream.
type Adapter struct {
	cfg  *upstream.Config
	http *upstream.HTTP
	now  func() time.Time
}

// New returns the adapter of an upstream.
func New(cfg *upstream.Config) *Adapter {
	return &Adapter{cfg: cfg, http: upstream.NewHTTP(cfg.Name, classify), now: time.Now}
}

// Token returns the JWT of an access key and secret key at a moment.
func Token(accessKey, secretKey string, now time.Time) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"iss": accessKey, "exp": now.Add(30 * time.Minute).Unix(), "nbf": now.Add(-5 * time.Second).Unix()})
	msg := head + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, []byte(secretKey))
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil))
}

func (a *Adapter) header() http.Header {
	return http.Header{"Authorization": {"Bearer " + Token(a.cfg.APIKey, a.cfg.SecretKey, a.now())}}
}

type envelope struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type taskData struct {
	TaskID        string `json:"task_id"`
	TaskStatus    string `json:"task_status"`
	TaskStatusMsg string `json:"task_status_msg"`
	TaskResult    struct {
		Images []struct {
			URL string `json:"url"`
		} `json:"images"`
		Videos []struct {
			URL string `json:"url"`
		} `json:"videos"`
	} `json:"task_result"`
}

// call sends a request and decodes the task of a code-0 answer.
func (a *Adapter) call(ctx context.Context, method, path string, body any) (*taskData, error) {
	var env envelope
	if err := a.http.Do(ctx, method, a.cfg.BaseURL+path, a.header(), body, &env); err != nil {
		return nil, err
	}
	if env.Code != 0 {
		e := classifyCode(env.Code, env.Message)
		e.Upstream, e.Status = a.cfg.Name, http.StatusOK
		return nil, e
	}
	var d taskData
	if len(env.Data) > 0 && string(env.Data) != "null" {
		if err := json.Unmarshal(env.Data, &d); err != nil {
			return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "unreadable data", Err: err}
		}
	}
	return &d, nil
}

// ratio maps a ratio to one Kling knows (16:9, 9:16, 1:1, and for images also 4:3, 3:4, 3:2, 2:3, 21:9);
// none is 1:1 for an image (studio's square default) and 16:9 for a video (Kling's default).
func ratio(r string, image bool) (string, bool) {
	switch r {
	case "":
		if image {
			return "1:1", true
		}
		return "16:9", true
	case "1:1":
		return "1:1", true
	case "16:9", "9:16":
		return r, true
	case "4:3", "3:4", "3:2", "2:3", "21:9":
		return r, image
	}
	return "", false
}

// Submit starts an image or video task.
func (a *Adapter) Submit(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	unsupported := func(msg string) error {
		return &upstream.Error{Class: upstream.ClassCapability, Upstream: a.cfg.Name, Message: msg}
	}
	var kind string
	body := map[string]any{"model_name": a.cfg.Model}
	if req.Media == upstream.MediaImage {
		in := req.Image
		kind = "images/generations"
		ar, ok := ratio(in.Ratio, true)
		if !ok {
			return nil, unsupported("ratio " + in.Ratio)
		}
		body["prompt"], body["n"], body["aspect_ratio"] = in.Prompt, 1, ar
		refs := in.ReferenceImages
		if len(in.Image) > 0 {
			refs = append(refs, in.Image)
		}
		switch len(refs) {
		case 0:
		case 1:
			body["image"] = base64.StdEncoding.EncodeToString(refs[0])
		default:
			return nil, unsupported("more than one reference image")
		}
		switch in.Resolution {
		case "", "1k":
		case "2k":
			body["resolution"] = "2k"
		default:
			return nil, unsupported("resolution " + in.Resolution)
		}
	} else {
		in := req.Video
		if in.Duration != 5 && in.Duration != 10 {
			return nil, unsupported(fmt.Sprintf("a %d s video", in.Duration))
		}
		body["duration"], body["prompt"], body["external_task_id"] = fmt.Sprint(in.Duration), in.Prompt, req.Ref
		switch strings.ToLower(in.Resolution) {
		case "", "720p":
			body["mode"] = "std"
		case "1080p":
			body["mode"] = "pro"
		default:
			return nil, unsupported("resolution " + in.Resolution)
		}
		switch len(in.Images) {
		case 0:
			kind = "videos/text2video"
			ar, ok := ratio(in.Ratio, false)
			if !ok {
				return nil, unsupported("ratio " + in.Ratio)
			}
			body["aspect_ratio"] = ar
		case 1, 2:
			kind = "videos/image2video"
			body["image"] = bare(in.Images[0])
			if len(in.Images) == 2 {
				body["image_tail"] = bare(in.Images[1])
			}
		default:
			return nil, unsupported("more than two images")
		}
		if len(in.Videos) > 0 || len(in.Audios) > 0 {
			return nil, unsupported("reference videos or audios")
		}
	}
	d, err := a.call(ctx, http.MethodPost, "/v1/"+kind, body)
	if err != nil {
		return nil, err
	}
	if d.TaskID == "" {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "no task_id", Err: upstream.ErrUnknownOutcome}
	}
	return a.task(kind, d), nil
}

// bare returns an image as Kling takes it: a URL, or Base64 without its data: prefix.
func bare(image string) string {
	if strings.HasPrefix(image, "data:") {
		if _, b64, ok := strings.Cut(image, ";base64,"); ok {
			return b64
		}
	}
	return image
}

// task maps Kling's task; its id carries the endpoint kind (videos/text2video/<task_id>).
func (a *Adapter) task(kind string, d *taskData) *upstream.Task {
	t := &upstream.Task{ID: kind + "/" + d.TaskID}
	switch d.TaskStatus {
	case "processing":
		t.Status = upstream.TaskRunning
	case "succeed":
		t.Status, t.Progress = upstream.TaskSucceeded, 100
		for _, im := range d.TaskResult.Images {
			t.Outputs = append(t.Outputs, upstream.Output{URL: im.URL})
		}
		for _, v := range d.TaskResult.Videos {
			t.Outputs = append(t.Outputs, upstream.Output{URL: v.URL})
		}
	case "failed":
		t.Status = upstream.TaskFailed
		t.Err = &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: d.TaskStatusMsg}
		if refusal(d.TaskStatusMsg) {
			t.Err.Class = upstream.ClassRefused
		}
	default: // submitted
		t.Status = upstream.TaskQueued
	}
	return t
}

// refusal reports whether a failure message is Kling's content-safety refusal.
func refusal(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "risk") || strings.Contains(m, "content security") || strings.Contains(m, "sensitive") || strings.Contains(msg, "风控")
}

func split(id string) (kind, taskID string, err error) {
	i := strings.LastIndex(id, "/")
	if i <= 0 {
		return "", "", fmt.Errorf("kling: malformed task id %q", id)
	}
	return id[:i], id[i+1:], nil
}

// Poll returns the state of a task.
func (a *Adapter) Poll(ctx context.Context, _ upstream.Media, id string) (*upstream.Task, error) {
	kind, taskID, err := split(id)
	if err != nil {
		return nil, err
	}
	d, err := a.call(ctx, http.MethodGet, "/v1/"+kind+"/"+url.PathEscape(taskID), nil)
	if err != nil {
		return nil, err
	}
	return a.task(kind, d), nil
}

// Find looks a video task up by studio's reference (external_task_id), under both video kinds.
func (a *Adapter) Find(ctx context.Context, m upstream.Media, ref string) (*upstream.Task, error) {
	if m != upstream.MediaVideo {
		return nil, fmt.Errorf("kling: image tasks: %w", upstream.ErrNotFindable)
	}
	for _, kind := range []string{"videos/text2video", "videos/image2video"} {
		d, err := a.call(ctx, http.MethodGet, "/v1/"+kind+"/"+url.PathEscape(ref), nil)
		if err != nil {
			var ue *upstream.Error
			if asError(err, &ue) && (ue.Status == http.StatusNotFound || ue.Code == "1203") {
				continue
			}
			return nil, err
		}
		if d.TaskID != "" {
			return a.task(kind, d), nil
		}
	}
	return nil, nil
}

// Cancel does nothing: Kling has no call that cancels a task.
func (a *Adapter) Cancel(context.Context, upstream.Media, string) error { return nil }

// Open downloads a result URL.
func (a *Adapter) Open(ctx context.Context, out upstream.Output) (io.ReadCloser, error) {
	return a.http.Download(ctx, out.URL, nil)
}

// Probe reads the account's resource packs of the last day: it checks the keys, generating nothing.
func (a *Adapter) Probe(ctx context.Context) error {
	now := a.now()
	_, err := a.call(ctx, http.MethodGet, fmt.Sprintf("/account/costs?start_time=%d&end_time=%d", now.Add(-24*time.Hour).UnixMilli(), now.UnixMilli()), nil)
	return err
}

func classify(status int, _ http.Header, body []byte) *upstream.Error {
	var env envelope
	if json.Unmarshal(body, &env) != nil || env.Code == 0 {
		return &upstream.Error{Class: upstream.StatusClass(status), Message: string(body[:min(len(body), 200)])}
	}
	e := classifyCode(env.Code, env.Message)
	if e.Class == upstream.ClassOther {
		e.Class = upstream.StatusClass(status)
	}
	return e
}

// classifyCode maps a Kling business code.
func classifyCode(code int, msg string) *upstream.Error {
	e := &upstream.Error{Code: fmt.Sprint(code), Message: msg, Class: upstream.ClassOther}
	switch {
	case code >= 1000 && code <= 1004, code == 1100, code == 1103, code == 1304:
		// 1100 account exception and 1304 IP whitelist policy come with HTTP 429 but need the operator
		// (check the account, contact Kling): out of rotation until a probe passes, not retried.
		e.Class = upstream.ClassRevoked
	case code == 1101 || code == 1102:
		e.Class = upstream.ClassUnpaid
	case code == 1300 || code == 1301:
		e.Class = upstream.ClassRefused
	case code == 1302 || code == 1303, code >= 5000 && code <= 5002:
		e.Class = upstream.ClassTransient
	case code == 1203:
		e.Class = upstream.ClassCapability
	}
	return e
}

func asError(err error, target **upstream.Error) bool { return errors.As(err, target) }
