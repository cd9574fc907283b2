// Package replicate is the upstream protocol `replicate`: Replicate predictions (any model on Replicate),
// base_url https://api.replicate.com/v1. Every call carries Authorization: Bearer <api_key>.
//
// The upstream's model is either an official model, owner/name, run with POST
// {base_url}/models/{owner}/{name}/predictions {input}, or a version, owner/name:version (or the bare
// 64-character version id), run with POST {base_url}/predictions {version, input}. The answer is the
// prediction {id, status, urls {get, cancel, stream, web}, ...}; its urls.get is
// {base_url}/predictions/{id} and urls.cancel {base_url}/predictions/{id}/cancel: studio stores the id
// (before the first poll), polls GET urls.get and cancels with POST urls.cancel (Replicate cancels a
// starting or a processing prediction). Statuses: starting, processing, succeeded, failed, canceled,
// aborted (the deadline passed before it started). A succeeded prediction's output is one URL or a list of
// URLs (the first is taken); output files expire an hour after the prediction ends, so studio copies them
// into its media store as soon as the poll sees them (no key is sent with the download). Progress is the
// last percentage the model printed in its logs (the tqdm bar "45%|████▌ | 9/20"), as the official Go
// SDK reads it. Replicate does not let the client name a prediction: a submission whose answer was lost
// fails with its refund.
//
// Inputs differ per model; studio sends the inputs most models share and nothing else: prompt always;
// aspect_ratio when the request names a ratio; for a video, duration (seconds), resolution (480p, 720p,
// 1080p) and the first frame as image and a second picture as last_frame_image (the inputs of the
// Seedance, Wan and Veo models on Replicate). Pick models with those inputs; only `images` (one or two)
// can be declared.
//
// Errors are problem details {title, detail, status}: 401 (revoked), 402 insufficient credit (unpaid), 403
// (revoked: the token or account is disabled), 404 an unknown model or version (capability), 422 input
// validation failed, 429 throttled with Retry-After (transient), 5xx transient. A failed prediction whose
// error speaks of NSFW content or of inputs or outputs flagged as sensitive (E005) is a content refusal.
//
// Pages followed (read 2026):
//   - https://replicate.com/docs/reference/http (predictions.create, models.predictions.create,
//     predictions.get, predictions.cancel, account.get; the Prediction object and its urls);
//   - https://replicate.com/docs/topics/predictions/lifecycle (statuses, aborted, the 30 minute limit) and
//     https://replicate.com/docs/topics/predictions/output-files (output URLs expire after an hour);
//   - https://replicate.com/docs/topics/predictions/rate-limits (429 with Retry-After);
//   - the official Go SDK github.com/replicate/replicate-go: prediction.go (CreatePrediction with version,
//     Progress from the logs), model.go (CreatePredictionWithModel: /models/{owner}/{name}/predictions),
//     status.go, error.go (APIError title/detail/status), account.go, client.go (Bearer, Retry-After).
package replicate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"studio/jobs/upstream"
)

// Protocol is the name of the protocol in the upstreams file.
const Protocol upstream.Protocol = "replicate"

// DefaultBaseURL is Replicate's API.
const DefaultBaseURL = "https://api.replicate.com/v1"

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

// Adapter talks to one Replicate upstream.
type Adapter struct {
	cfg  *upstream.Config
	http *upstream.HTTP
	// path and version say where a prediction is created: /models/{owner}/{name}/predictions, or
	// /predictions with the version.
	path, version string
}

var (
	modelRef   = regexp.MustCompile(`^([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)$`)
	versionRef = regexp.MustCompile(`^(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+:)?([0-9a-f]{64})$`)
	predID     = regexp.MustCompile(`^[A-Za-z0-9]+$`)
)

// New returns the adapter of an upstream; the model must be owner/name, owner/name:version or a version.
func New(cfg *upstream.Config) (upstream.TaskAdapter, error) {
	a := &Adapter{cfg: cfg, http: upstream.NewHTTP(cfg.Name, classify)}
	if m := versionRef.FindStringSubmatch(cfg.Model); m != nil {
		a.path, a.version = "/predictions", m[1]
	} else if m := modelRef.FindStringSubmatch(cfg.Model); m != nil {
		a.path = "/models/" + m[1] + "/" + m[2] + "/predictions"
	} else {
		return nil, fmt.Errorf("model %q is neither owner/name nor owner/name:<64 hex version>", cfg.Model)
	}
	return a, nil
}

func (a *Adapter) header() http.Header {
	return http.Header{"Authorization": {"Bearer " + a.cfg.APIKey}}
}

// createRequest is the body of a prediction's creation.
type createRequest struct {
	Version string         `json:"version,omitempty"`
	Input   map[string]any `json:"input"`
}

type prediction struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  any             `json:"error"`
	Logs   string          `json:"logs"`
	URLs   struct {
		Get    string `json:"get"`
		Cancel string `json:"cancel"`
	} `json:"urls"`
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
		out := map[string]any{"prompt": in.Prompt}
		if in.Ratio != "" {
			out["aspect_ratio"] = in.Ratio
		}
		return out, nil
	}
	in := req.Video
	if len(in.Videos) > 0 || len(in.Audios) > 0 || len(in.Images) > 2 {
		return nil, fmt.Errorf("reference videos, audios or more than two pictures")
	}
	out := map[string]any{"prompt": in.Prompt}
	if in.Ratio != "" {
		out["aspect_ratio"] = in.Ratio
	}
	if in.Duration > 0 {
		out["duration"] = in.Duration
	}
	if in.Resolution != "" {
		out["resolution"] = strings.ToLower(in.Resolution)
	}
	if len(in.Images) > 0 {
		out["image"] = in.Images[0]
	}
	if len(in.Images) > 1 {
		out["last_frame_image"] = in.Images[1]
	}
	return out, nil
}

// Submit creates a prediction.
func (a *Adapter) Submit(ctx context.Context, req upstream.TaskRequest) (*upstream.Task, error) {
	input, err := Input(req)
	if err != nil {
		return nil, &upstream.Error{Class: upstream.ClassCapability, Upstream: a.cfg.Name, Message: "the replicate protocol cannot send " + err.Error()}
	}
	var out prediction
	if err := a.http.Do(ctx, http.MethodPost, a.cfg.BaseURL+a.path, a.header(), createRequest{Version: a.version, Input: input}, &out); err != nil {
		return nil, err
	}
	if !predID.MatchString(out.ID) {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "no prediction id in the answer", Err: upstream.ErrUnknownOutcome}
	}
	return a.task(&out), nil
}

// getURL is the prediction's urls.get.
func (a *Adapter) getURL(id string) string { return a.cfg.BaseURL + "/predictions/" + id }

// Poll returns the state of a prediction (GET urls.get).
func (a *Adapter) Poll(ctx context.Context, m upstream.Media, id string) (*upstream.Task, error) {
	if !predID.MatchString(id) {
		return nil, &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Status: http.StatusNotFound, Message: "not a prediction id: " + id}
	}
	var out prediction
	if err := a.http.Do(ctx, http.MethodGet, a.getURL(id), a.header(), nil, &out); err != nil {
		return nil, err
	}
	out.ID = id
	return a.task(&out), nil
}

// progress is the tqdm bar a model prints: "45%|████▌     | 9/20 [...]".
var progress = regexp.MustCompile(`^\s*(\d+)%\s*\|.+?\|\s*(\d+)/(\d+)`)

// Progress returns the last percentage printed in a prediction's logs, 0 when none.
func Progress(logs string) int {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if m := progress.FindStringSubmatch(lines[i]); m != nil {
			p, _ := strconv.Atoi(m[1])
			return min(max(p, 0), 99)
		}
	}
	return 0
}

func (a *Adapter) task(p *prediction) *upstream.Task {
	t := &upstream.Task{ID: p.ID, Progress: Progress(p.Logs)}
	switch p.Status {
	case "starting":
		t.Status = upstream.TaskQueued
	case "processing":
		t.Status = upstream.TaskRunning
	case "succeeded":
		t.Status, t.Progress = upstream.TaskSucceeded, 100
		if u := firstURL(p.Output); u != "" {
			t.Outputs = []upstream.Output{{URL: u}}
		} else {
			t.Status = upstream.TaskFailed
			t.Err = &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Message: "succeeded without an output URL"}
		}
	case "canceled":
		t.Status = upstream.TaskCancelled
	default: // failed, aborted
		t.Status = upstream.TaskFailed
		msg := fmt.Sprint(p.Error)
		if p.Error == nil {
			msg = p.Status
		}
		t.Err = &upstream.Error{Class: upstream.ClassOther, Upstream: a.cfg.Name, Code: p.Status, Message: msg}
		if isRefusal(msg) {
			t.Err.Class = upstream.ClassRefused
		}
	}
	return t
}

// firstURL reads an output that is one URL or a list of URLs.
func firstURL(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) == nil && strings.HasPrefix(one, "http") {
		return one
	}
	var many []any
	if json.Unmarshal(raw, &many) == nil {
		for _, x := range many {
			if s, ok := x.(string); ok && strings.HasPrefix(s, "http") {
				return s
			}
		}
	}
	return ""
}

// isRefusal reports whether a failed prediction's error is a refusal of the content.
func isRefusal(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "nsfw") || strings.Contains(m, "flagged as sensitive") || strings.Contains(m, "(e005)") ||
		strings.Contains(m, "safety filter") || strings.Contains(m, "content moderation")
}

// Cancel cancels a starting or processing prediction (POST urls.cancel); an ended one is left as it is.
func (a *Adapter) Cancel(ctx context.Context, m upstream.Media, id string) error {
	if !predID.MatchString(id) {
		return nil
	}
	return a.http.Do(ctx, http.MethodPost, a.getURL(id)+"/cancel", a.header(), nil, nil)
}

// Open downloads an output file (a signed replicate.delivery URL: no key is sent).
func (a *Adapter) Open(ctx context.Context, out upstream.Output) (io.ReadCloser, error) {
	return a.http.Download(ctx, out.URL, nil)
}

// Probe reads the account of the token: it checks the key without running anything.
func (a *Adapter) Probe(ctx context.Context) error {
	var out json.RawMessage
	return a.http.Do(ctx, http.MethodGet, a.cfg.BaseURL+"/account", a.header(), nil, &out)
}

// classify maps a Replicate error answer (problem details) to a class.
func classify(status int, _ http.Header, body []byte) *upstream.Error {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	out := &upstream.Error{Class: upstream.StatusClass(status)}
	if json.Unmarshal(body, &p) != nil {
		out.Message = string(body[:min(len(body), 200)])
		return out
	}
	out.Code, out.Message = p.Title, p.Detail
	d := strings.ToLower(p.Title + " " + p.Detail)
	switch {
	case status == http.StatusPaymentRequired || strings.Contains(d, "insufficient credit") || strings.Contains(d, "billing"):
		out.Class = upstream.ClassUnpaid
	case status == http.StatusUnprocessableEntity && isRefusal(d):
		out.Class = upstream.ClassRefused
	}
	return out
}
