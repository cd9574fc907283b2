// Package gemini is the upstream protocol `gemini`: the Google Gemini API (Google AI Studio keys), base_url
// https://generativelanguage.googleapis.com/v1beta. Every call carries the key in the x-goog-api-key header.
//
// Images (Gemini image models such as gemini-2.5-flash-image, gemini-3-pro-image-preview) are one
// synchronous call: POST {base_url}/models/{model}:generateContent with contents [{role user, parts [{text
// prompt}, {inlineData {mimeType, data}} per reference picture]}] and generationConfig {responseModalities
// [IMAGE], imageConfig {aspectRatio, imageSize 2K|4K}}; the answer's candidates[0].content.parts carry the
// picture as inlineData (base64). A refusal comes back with HTTP 200: promptFeedback.blockReason (SAFETY,
// PROHIBITED_CONTENT, BLOCKLIST, IMAGE_SAFETY, ...) for the prompt, or a candidate whose finishReason is
// SAFETY, PROHIBITED_CONTENT, IMAGE_SAFETY, IMAGE_PROHIBITED_CONTENT, BLOCKLIST, SPII, RECITATION or
// IMAGE_RECITATION for the result; NO_IMAGE, IMAGE_OTHER or OTHER (the model answered without a picture)
// is a plain failure.
//
// Videos (Veo: veo-3.1-generate-preview, veo-3.1-fast-generate-preview, veo-3.0-*, veo-2.0-*) are
// long-running operations: POST {base_url}/models/{model}:predictLongRunning {instances [{prompt}],
// parameters {aspectRatio 16:9|9:16, durationSeconds, resolution 720p|1080p|4k}} answers {name:
// "models/{model}/operations/{id}"}; GET {base_url}/{name} polls it until done is true; then
// response.generateVideoResponse.generatedSamples[].video.uri names the file
// (.../v1beta/files/{id}:download?alt=media), downloaded with the key, as the SDK does, from
// {base_url}/files/{id}:download?alt=media (the key is never sent to another host). A finished operation
// with error {code, message, status} failed; one with raiMediaFilteredCount > 0 and no sample was refused
// by moderation (raiMediaFilteredReasons). Veo 3 lengths are 4, 6 or 8 s (1080p and 4k at 8 s only), Veo
// 2 lengths 5 to 8 s at 720p: another length or resolution, or an aspect ratio other than 16:9 and 9:16,
// is not served (a capability error: routing moves on). Veo 3 models always make sound (the Gemini API has
// no generateAudio parameter): declare generate_audio for them, not for Veo 2. The Developer API takes
// first frames only as bytes, not URLs, so image-to-video (video `images`) is not declared.
//
// The Gemini API has no cancel call for these operations and no client-chosen name: a cancelled video is
// left to end at Google and its result ignored; a submission whose answer was lost fails with its refund.
// Veo reports no progress figure.
//
// Errors are {"error": {"code", "message", "status", "details"}}: 400 INVALID_ARGUMENT with ErrorInfo
// reason API_KEY_INVALID (or API_KEY_EXPIRED), 401 UNAUTHENTICATED and 403 PERMISSION_DENIED (such as a
// key reported as leaked) are a revoked key; 400 FAILED_PRECONDITION (billing not enabled) and a 429 without
// RetryInfo that says the prepaid credits are depleted are an unpaid account; 429 RESOURCE_EXHAUSTED is
// otherwise a rate limit (transient, its RetryInfo.retryDelay honoured like Retry-After); 500, 503 and 504
// transient; 404 NOT_FOUND (an unknown model) capability; a 400 that says the prompt violates the usage
// guidelines is a refusal.
//
// Pages followed (read 2026):
//   - the official Go SDK github.com/googleapis/go-genai: models.go (generateVideosParametersToMldev,
//     generateVideosConfigToMldev, imageConfigToMldev, generateVideosOperationFromMldev: the mldev field
//     names and what the Developer API refuses), types.go (ImageConfig, FinishReason, BlockedReason),
//     files.go (Download: files/{name}:download?alt=media with the key), operations.go (no cancel);
//   - https://ai.google.dev/api/generate-content (models.generateContent, GenerationConfig, ImageConfig,
//     PromptFeedback, Candidate.finishReason);
//   - https://ai.google.dev/gemini-api/docs/image-generation and https://ai.google.dev/gemini-api/docs/video
//     (Veo parameters, durations, resolutions, REST polling of the operation);
//   - https://ai.google.dev/gemini-api/docs/troubleshooting (error codes) and the google.rpc error model
//     (ErrorInfo, RetryInfo).
package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"studio/jobs/upstream"
	"studio/models/media"
)

// Protocol is the name of the protocol in the upstreams file.
const Protocol upstream.Protocol = "gemini"

// DefaultBaseURL is the Gemini API.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

func init() {
	upstream.RegisterProtocol(Protocol, upstream.ProtocolSpec{
		Capabilities: map[upstream.Media][]upstream.Capability{
			upstream.MediaImage: {upstream.CapReferenceImages, upstream.CapLarge},
			upstream.MediaVideo: {upstream.CapGenerateAudio},
		},
		DefaultBaseURL: DefaultBaseURL,
		Required:       []string{"api_key", "model"},
		New:            func(cfg *upstream.Config) (upstream.TaskAdapter, error) { return New(cfg), nil },
	})
}

// Adapter talks to one Gemini API upstream.
type Adapter struct {
	cfg  *upstream.Config
	http *upstream.HTTP
}

// New returns the adapter of an upstream.
func New(cfg *upstream.Config) *Adapter {
	return &Adapter{cfg: cfg, http: upstream.NewHTTP(cfg.Name, classify)}
}

func (a *Adapter) header() http.Header {
	return http.Header{"X-Goog-Api-Key": {a.cfg.APIKey}}
}

// model is the configured model id without a models/ prefix.
func (a *Adapter) model(tier string) string {
	m := strings.TrimPrefix(a.cfg.Model, "models/")
	if m == "" {
		m = tier
	}
	return m
}

type part struct {
	Text       string      `json:"text,omitempty"`
	InlineData *inlineData `json:"inlineData,omitempty"`
}

type inlineData struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type imageConfig struct {
	AspectRatio string `json:"aspectRatio,omitempty"`
	ImageSize   string `json:"imageSize,omitempty"`
}

type generationConfig struct {
	ResponseModalities []string     `json:"responseModalities"`
	ImageConfig        *imageConfig `json:"imageConfig,omitempty"`
}

// generateRequest is the body of models.generateContent.
type generateRequest struct {
	Contents         []content        `json:"contents"`
	GenerationConfig generationConfig `json:"generationConfig"`
}

type generateAnswer struct {
	Candidates []struct {
		Content struct {
			Parts []part `json:"parts"`
		} `json:"content"`
		FinishReason  string `json:"finishReason"`
		FinishMessage string `json:"finishMessage"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
}

// AspectRatios are the ratios Gemini image models accept.
var AspectRatios = []string{"1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9"}

// refusals are the finish and block reasons that mean content moderation.
var refusals = []string{"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY",
	"IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR", "JAILBREAK", "OTHER_SAFETY"}

// Submit generates an image (one call: the task answers succeeded) or starts a Veo operation.
func (a *Adapter) Submit(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	if req.Media == upstream.MediaImage {
		return a.image(ctx, req)
	}
	return a.video(ctx, req)
}

func (a *Adapter) unsupported(what string) error {
	return &upstream.Error{Class: upstream.ClassCapability, Upstream: a.cfg.Name, Message: "the gemini protocol cannot serve " + what}
}

// ImageBody builds the generateContent body of an image request.
func ImageBody(in upstream.ImageRequest) (generateRequest, error) {
	parts := []part{{Text: in.Prompt}}
	for _, ref := range append(append([][]byte{}, in.ReferenceImages...), nonEmpty(in.Image)...) {
		mime := "image/png"
		if k, err := media.Detect(ref); err == nil {
			mime = k.MIME
		}
		parts = append(parts, part{InlineData: &inlineData{MIMEType: mime, Data: base64.StdEncoding.EncodeToString(ref)}})
	}
	body := generateRequest{Contents: []content{{Role: "user", Parts: parts}}, GenerationConfig: generationConfig{ResponseModalities: []string{"IMAGE"}}}
	ic := &imageConfig{}
	if in.Ratio != "" {
		if !slices.Contains(AspectRatios, in.Ratio) {
			return body, fmt.Errorf("the aspect ratio %s", in.Ratio)
		}
		ic.AspectRatio = in.Ratio
	}
	switch in.Resolution {
	case "", "1k":
	case "2k", "4k":
		ic.ImageSize = strings.ToUpper(in.Resolution)
	default:
		return body, fmt.Errorf("the resolution %s", in.Resolution)
	}
	if *ic != (imageConfig{}) {
		body.GenerationConfig.ImageConfig = ic
	}
	return body, nil
}

func nonEmpty(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	return [][]byte{b}
}

func (a *Adapter) image(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	if len(req.Image.Mask) > 0 || req.Image.Background == "transparent" {
		return nil, a.unsupported("a mask or a transparent background")
	}
	body, err := ImageBody(req.Image)
	if err != nil {
		return nil, a.unsupported(err.Error())
	}
	var out generateAnswer
	if err := a.http.Do(ctx, http.MethodPost, a.cfg.BaseURL+"/models/"+url.PathEscape(a.model(""))+":generateContent", a.header(), body, &out); err != nil {
		return nil, err
	}
	if pf := out.PromptFeedback; pf != nil && pf.BlockReason != "" {
		return nil, &upstream.Error{Class: upstream.ClassRefused, Upstream: a.cfg.Name, Status: http.StatusOK, Code: pf.BlockReason, Message: pf.BlockReasonMessage}
	}
	if len(out.Candidates) == 0 {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "no candidate in the answer"}
	}
	c := out.Candidates[0]
	for _, p := range c.Content.Parts {
		if p.InlineData == nil || !strings.HasPrefix(p.InlineData.MIMEType, "image/") {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(p.InlineData.Data)
		if err != nil {
			return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "unreadable image", Err: err}
		}
		return &upstream.Task{ID: "image:" + req.Ref, Status: upstream.TaskSucceeded, Progress: 100,
			Outputs: []upstream.Output{{Data: b, MIME: p.InlineData.MIMEType}}}, nil
	}
	class := upstream.ClassOther
	if slices.Contains(refusals, c.FinishReason) {
		class = upstream.ClassRefused
	}
	return nil, &upstream.Error{Class: class, Upstream: a.cfg.Name, Status: http.StatusOK, Code: c.FinishReason, Message: "no image in the answer: " + c.FinishMessage}
}

type videoInstance struct {
	Prompt string `json:"prompt"`
}

type videoParameters struct {
	AspectRatio     string `json:"aspectRatio,omitempty"`
	DurationSeconds int    `json:"durationSeconds,omitempty"`
	Resolution      string `json:"resolution,omitempty"`
}

// videoRequest is the body of models.predictLongRunning.
type videoRequest struct {
	Instances  []videoInstance `json:"instances"`
	Parameters videoParameters `json:"parameters"`
}

// VideoBody builds the predictLongRunning body of a video, or says what the model cannot do.
func VideoBody(model string, in upstream.VideoRequest) (videoRequest, error) {
	body := videoRequest{Instances: []videoInstance{{Prompt: in.Prompt}}}
	veo2 := strings.HasPrefix(model, "veo-2")
	res := strings.ToLower(in.Resolution)
	switch {
	case len(in.Images) > 0 || len(in.Videos) > 0 || len(in.Audios) > 0:
		return body, fmt.Errorf("reference images, videos or audios")
	case in.Ratio != "" && in.Ratio != "16:9" && in.Ratio != "9:16":
		return body, fmt.Errorf("the aspect ratio %s", in.Ratio)
	case veo2 && in.Duration != 0 && (in.Duration < 5 || in.Duration > 8):
		return body, fmt.Errorf("a %d s video", in.Duration)
	case !veo2 && in.Duration != 0 && in.Duration != 4 && in.Duration != 6 && in.Duration != 8:
		return body, fmt.Errorf("a %d s video", in.Duration)
	case res != "" && res != "720p" && res != "1080p" && res != "4k":
		return body, fmt.Errorf("the resolution %s", in.Resolution)
	case veo2 && res != "" && res != "720p":
		return body, fmt.Errorf("the resolution %s on Veo 2", in.Resolution)
	case res != "" && res != "720p" && in.Duration != 8:
		return body, fmt.Errorf("%s at %d s (only 8 s)", in.Resolution, in.Duration)
	}
	body.Parameters = videoParameters{AspectRatio: in.Ratio, DurationSeconds: in.Duration, Resolution: res}
	if veo2 {
		body.Parameters.Resolution = "" // Veo 2 has no resolution parameter: it makes 720p
	}
	return body, nil
}

type operation struct {
	Name  string `json:"name"`
	Done  bool   `json:"done"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
	Response *struct {
		GenerateVideoResponse struct {
			GeneratedSamples []struct {
				Video struct {
					URI string `json:"uri"`
				} `json:"video"`
			} `json:"generatedSamples"`
			RaiMediaFilteredCount   int      `json:"raiMediaFilteredCount"`
			RaiMediaFilteredReasons []string `json:"raiMediaFilteredReasons"`
		} `json:"generateVideoResponse"`
	} `json:"response"`
}

// operationName is what an operation's name may look like: models/{model}/operations/{id} or
// operations/{id}, nothing that could leave the API's path.
var operationName = regexp.MustCompile(`^(models/[A-Za-z0-9._-]+/)?operations/[A-Za-z0-9._-]+$`)

func (a *Adapter) video(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	model := a.model(req.Video.Tier)
	body, err := VideoBody(model, req.Video)
	if err != nil {
		return nil, a.unsupported(err.Error())
	}
	var out operation
	if err := a.http.Do(ctx, http.MethodPost, a.cfg.BaseURL+"/models/"+url.PathEscape(model)+":predictLongRunning", a.header(), body, &out); err != nil {
		return nil, err
	}
	if !operationName.MatchString(out.Name) {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: fmt.Sprintf("no usable operation name in the answer: %q", out.Name), Err: upstream.ErrUnknownOutcome}
	}
	return &upstream.Task{ID: out.Name, Status: upstream.TaskQueued}, nil
}

// Poll returns the state of a Veo operation.
func (a *Adapter) Poll(ctx context.Context, m upstream.Media, id string) (*upstream.Task, error) {
	if !operationName.MatchString(id) {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Status: http.StatusNotFound, Message: "not an operation name: " + id}
	}
	var op operation
	if err := a.http.Do(ctx, http.MethodGet, a.cfg.BaseURL+"/"+id, a.header(), nil, &op); err != nil {
		return nil, err
	}
	t := &upstream.Task{ID: id}
	switch {
	case !op.Done:
		t.Status = upstream.TaskRunning
	case op.Error != nil:
		t.Status = upstream.TaskFailed
		t.Err = &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Code: op.Error.Status, Message: op.Error.Message}
		if isModeration(op.Error.Message) {
			t.Err.Class = upstream.ClassRefused
		}
	default:
		var r = op.Response
		if r != nil {
			for _, s := range r.GenerateVideoResponse.GeneratedSamples {
				if s.Video.URI != "" {
					t.Status, t.Progress = upstream.TaskSucceeded, 100
					t.Outputs = []upstream.Output{{URL: s.Video.URI, MIME: "video/mp4"}}
					return t, nil
				}
			}
		}
		t.Status = upstream.TaskFailed
		t.Err = &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "done without a video"}
		if r != nil && r.GenerateVideoResponse.RaiMediaFilteredCount > 0 {
			t.Err.Class = upstream.ClassRefused
			t.Err.Message = "filtered: " + strings.Join(r.GenerateVideoResponse.RaiMediaFilteredReasons, "; ")
		}
	}
	return t, nil
}

// isModeration reports whether a failed operation's message is a refusal of the content.
func isModeration(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "usage guidelines") || strings.Contains(m, "responsible ai") || strings.Contains(m, "violates")
}

// Cancel does nothing: the Gemini API offers no cancel of a Veo operation (it ends there, its result is
// ignored).
func (a *Adapter) Cancel(ctx context.Context, m upstream.Media, id string) error { return nil }

// fileName finds the file of a video URI (…/files/{name}:download?alt=media or files/{name}).
var fileName = regexp.MustCompile(`(?:^|/)files/([A-Za-z0-9_-]+)(?::download)?(?:\?|$)`)

// Open downloads a generated video with the key, from the configured host only, as the SDK does.
func (a *Adapter) Open(ctx context.Context, out upstream.Output) (io.ReadCloser, error) {
	m := fileName.FindStringSubmatch(out.URL)
	if m == nil {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "not a Gemini file URI: " + out.URL}
	}
	return a.http.Download(ctx, a.cfg.BaseURL+"/files/"+m[1]+":download?alt=media", a.header())
}

// Probe reads the configured model: it checks the key and that the model exists, generating nothing.
func (a *Adapter) Probe(ctx context.Context) error {
	var out json.RawMessage
	return a.http.Do(ctx, http.MethodGet, a.cfg.BaseURL+"/models/"+url.PathEscape(a.model("")), a.header(), nil, &out)
}

// apiError is the google.rpc.Status of an error answer.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`
		RetryDelay string `json:"retryDelay"`
	} `json:"details"`
}

// classify maps a Gemini API error answer to a class.
func classify(status int, _ http.Header, body []byte) *upstream.Error {
	var eb struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &eb) != nil || eb.Error == nil {
		return &upstream.Error{Class: upstream.StatusClass(status), Message: string(body[:min(len(body), 200)])}
	}
	e := eb.Error
	out := &upstream.Error{Class: upstream.StatusClass(status), Code: e.Status, Message: e.Message}
	var reason string
	for _, d := range e.Details {
		if d.Reason != "" {
			reason = d.Reason
		}
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && d.RetryDelay != "" {
			if dur, err := time.ParseDuration(d.RetryDelay); err == nil && dur > 0 {
				out.RetryAfter = dur
			}
		}
	}
	if reason != "" {
		out.Code = e.Status + "/" + reason
	}
	msg := strings.ToLower(e.Message)
	switch {
	case strings.HasPrefix(reason, "API_KEY_") || e.Status == "UNAUTHENTICATED" || e.Status == "PERMISSION_DENIED":
		out.Class = upstream.ClassRevoked
	case e.Status == "FAILED_PRECONDITION" && (strings.Contains(msg, "billing") || strings.Contains(msg, "free tier")):
		out.Class = upstream.ClassUnpaid
	case status == http.StatusTooManyRequests && out.RetryAfter == 0 && (strings.Contains(msg, "credits") || strings.Contains(msg, "prepay")):
		out.Class = upstream.ClassUnpaid
	case status == http.StatusBadRequest && isModeration(e.Message):
		out.Class = upstream.ClassRefused
	}
	return out
}
