package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Task protocols. A provider family whose generations are upstream tasks (submitted once, then polled)
// is its own package under jobs/upstream/<name> that calls RegisterProtocol in its init; the jobs
// package imports every one of them, and the upstreams file accepts `protocol: <name>` once registered.
// The jobs package drives every task protocol through one path (jobs/tasks.go): it records that a
// submission is under way before Submit, stores the provider's task id before the first Poll, copies the
// outputs into the media store as soon as they are ready, and cancels the task when the job ends early.

// TaskStatus is the state of an upstream task.
type TaskStatus string

// The task states every protocol maps its own to.
const (
	TaskQueued    TaskStatus = "queued"
	TaskRunning   TaskStatus = "running"
	TaskSucceeded TaskStatus = "succeeded"
	TaskFailed    TaskStatus = "failed"
	TaskCancelled TaskStatus = "cancelled"
)

// Ended reports whether the task will not change any more.
func (s TaskStatus) Ended() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskCancelled
}

// Output is one result of a task: a URL to download (provider URLs expire) or the bytes themselves.
type Output struct {
	URL  string
	Data []byte
	MIME string
}

// Task is the state of one upstream task.
type Task struct {
	ID       string
	Status   TaskStatus
	Progress int      // 0..100 when the provider reports it, 0 otherwise
	Outputs  []Output // when succeeded
	// Err says why a failed task failed (its Class is ClassRefused for a moderation refusal); for logs.
	Err *Error
}

// TaskRequest is one submission: an image or a video.
type TaskRequest struct {
	Media Media
	// Ref is studio's own name of this submission, unique per job and attempt; a protocol whose provider
	// lets the client name a task sends it (Finder finds the task by it after a crash).
	Ref   string
	Image ImageRequest
	Video VideoRequest
}

// TaskAdapter is what a task protocol implements.
type TaskAdapter interface {
	// Submit starts a task. A provider that answers at once (a synchronous image call) returns a
	// succeeded task with its outputs. An error is classified (*Error); an unclassified one is a
	// failure whose outcome is unknown (the request may have reached the provider).
	Submit(ctx context.Context, req TaskRequest) (*Task, error)
	// Poll returns the current state of a task.
	Poll(ctx context.Context, media Media, id string) (*Task, error)
	// Cancel cancels (or deletes) a task; a task that already ended is not an error.
	Cancel(ctx context.Context, media Media, id string) error
	// Open downloads an output; the caller closes it.
	Open(ctx context.Context, out Output) (io.ReadCloser, error)
	// Probe checks the key and the reachability of the provider without generating anything.
	Probe(ctx context.Context) error
}

// Finder is implemented by protocols whose provider lets the client name a task (TaskRequest.Ref).
type Finder interface {
	// Find returns the task submitted with ref, or nil (and no error) when the provider has none; an error
	// wrapping ErrNotFindable when the provider cannot look tasks of that media up by reference.
	Find(ctx context.Context, media Media, ref string) (*Task, error)
}

// ErrNotFindable marks a Find of a media whose tasks the provider cannot look up by reference: a
// submission of it whose answer was lost cannot be followed (a retry would not help).
var ErrNotFindable = errors.New("the provider cannot find tasks of this media by reference")

// ErrUnknownOutcome marks a submission whose answer never came (a time-out, a connection cut after
// the request was sent): the provider may have started, and may charge for, a task.
var ErrUnknownOutcome = errors.New("the submission's outcome is unknown")

// ProtocolSpec describes a task protocol to the upstreams file and builds its adapters.
type ProtocolSpec struct {
	// Capabilities lists, per media the protocol serves, the capabilities it can honour; an upstream
	// declaring another one, or of another media, is refused when the file is loaded.
	Capabilities map[Media][]Capability
	// DefaultBaseURL is used when the entry has no base_url.
	DefaultBaseURL string
	// Required lists the keys (api_key, secret_key, model, base_url) an entry must give.
	Required []string
	// New builds the adapter of one upstream.
	New func(cfg *Config) (TaskAdapter, error)
}

var protocols = struct {
	sync.RWMutex
	m map[Protocol]ProtocolSpec
}{m: map[Protocol]ProtocolSpec{}}

// RegisterProtocol makes `protocol: name` known to the upstreams file; protocol packages call it in
// their init. Registering a name twice, or openai or builtin, panics.
func RegisterProtocol(name Protocol, spec ProtocolSpec) {
	protocols.Lock()
	defer protocols.Unlock()
	if name == ProtocolOpenAI || name == ProtocolBuiltin || name == "" {
		panic(fmt.Sprintf("upstream: protocol %q is reserved", name))
	}
	if _, dup := protocols.m[name]; dup {
		panic(fmt.Sprintf("upstream: protocol %q registered twice", name))
	}
	if spec.New == nil {
		panic(fmt.Sprintf("upstream: protocol %q has no constructor", name))
	}
	protocols.m[name] = spec
}

// protocolSpec returns the registered spec of a task protocol.
func protocolSpec(name Protocol) (ProtocolSpec, bool) {
	protocols.RLock()
	defer protocols.RUnlock()
	s, ok := protocols.m[name]
	return s, ok
}

// KnownProtocols returns openai, builtin and every registered task protocol, sorted after those two.
func KnownProtocols() []Protocol {
	protocols.RLock()
	defer protocols.RUnlock()
	out := make([]Protocol, 0, len(protocols.m))
	for p := range protocols.m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return append([]Protocol{ProtocolOpenAI, ProtocolBuiltin}, out...)
}

func knownProtocol(p Protocol) bool {
	if p == ProtocolOpenAI || p == ProtocolBuiltin {
		return true
	}
	_, ok := protocolSpec(p)
	return ok
}

func protocolList() string {
	var names []string
	for _, p := range KnownProtocols() {
		names = append(names, string(p))
	}
	return strings.Join(names, ", ")
}

// checkProtocol validates an entry against its task protocol's spec: it returns the offending key and
// the message, or "" when the entry fits.
func checkProtocol(c *Config) (key, msg string) {
	spec, ok := protocolSpec(c.Protocol)
	if !ok {
		return "", ""
	}
	caps, ok := spec.Capabilities[c.Media]
	if !ok {
		var media []string
		for m := range spec.Capabilities {
			media = append(media, string(m))
		}
		sort.Strings(media)
		return "media", fmt.Sprintf("the %s protocol serves %s, not %s", c.Protocol, strings.Join(media, " and "), c.Media)
	}
	for _, k := range spec.Required {
		var v string
		switch k {
		case "api_key":
			v = c.APIKey
		case "secret_key":
			v = c.SecretKey
		case "model":
			v = c.Model
		case "base_url":
			v = c.BaseURL
		}
		if v == "" {
			return k, fmt.Sprintf("is required for the %s protocol", c.Protocol)
		}
	}
	for _, capability := range c.Capabilities {
		if !slices.Contains(caps, capability) {
			names := make([]string, 0, len(caps))
			for _, a := range caps {
				names = append(names, string(a))
			}
			return "capabilities", fmt.Sprintf("the %s protocol cannot honour %q for %s (it can: %s)", c.Protocol, capability, c.Media, strings.Join(names, ", "))
		}
	}
	if c.SecretKey != "" && !slices.Contains(spec.Required, "secret_key") {
		return "secret_key", fmt.Sprintf("is not used by the %s protocol", c.Protocol)
	}
	return "", ""
}

// HTTP is the HTTP side the task protocols share: JSON in and out, errors classified by the protocol.
type HTTP struct {
	Name   string // channel name, for errors
	Client *http.Client
	// Classify turns a non-2xx answer into a classified error.
	Classify func(status int, header http.Header, body []byte) *Error
}

// NewHTTP returns the HTTP side of an upstream with its own client (no total time-out: each call runs
// under the context's deadline).
func NewHTTP(name string, classify func(status int, header http.Header, body []byte) *Error) *HTTP {
	return &HTTP{Name: name, Client: &http.Client{Transport: http.DefaultTransport}, Classify: classify}
}

// MaxAnswer bounds a JSON answer read from a provider.
const MaxAnswer = 64 << 20

// Do sends one request: in (when not nil) as JSON, or raw bytes when in is a []byte with the header's
// Content-Type set; out (when not nil) decoded from a 2xx JSON answer. A failure to reach the provider
// or read its answer is transient when the request cannot have been sent, and otherwise wraps
// ErrUnknownOutcome for a POST (the provider may have acted on it).
func (h *HTTP) Do(ctx context.Context, method, url string, header http.Header, in, out any) error {
	var body io.Reader
	if raw, ok := in.([]byte); ok {
		body = bytes.NewReader(raw)
	} else if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if in != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return h.transportError(method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil {
		return h.transportError(method, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := h.Classify(resp.StatusCode, resp.Header, data)
		e.Upstream, e.Status = h.Name, resp.StatusCode
		if e.RetryAfter == 0 {
			e.RetryAfter = RetryAfter(resp.Header)
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return &Error{Class: ClassOther, Upstream: h.Name, Status: resp.StatusCode, Message: "unreadable answer: " + truncate(string(data), 200), Err: err}
		}
	}
	return nil
}

// transportError classifies a failure with no HTTP answer.
func (h *HTTP) transportError(method string, err error) error {
	e := &Error{Class: ClassTransient, Upstream: h.Name, Err: err}
	if method == http.MethodPost {
		e.Err = fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	}
	return e
}

// Download opens a result URL with GET (header may carry a key); a non-2xx answer is classified.
func (h *HTTP) Download(ctx context.Context, url string, header http.Header) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return nil, &Error{Class: ClassTransient, Upstream: h.Name, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		e := &Error{Class: StatusClass(resp.StatusCode), Upstream: h.Name, Status: resp.StatusCode, Message: "download: " + truncate(string(data), 200)}
		return nil, e
	}
	return resp.Body, nil
}

// UnknownOutcome reports whether err is a submission whose outcome is unknown.
func UnknownOutcome(err error) bool {
	return errors.Is(err, ErrUnknownOutcome) || isTimeout(err)
}

// Pixels returns the width and height of a ratio (width:height) at a resolution (1k, 2k, 4k: the long
// side 1024, 2048, 4096), rounded to multiples of 16 as image providers ask.
func Pixels(ratio, resolution string) (int, int) {
	long := 1024
	switch resolution {
	case "2k":
		long = 2048
	case "4k":
		long = 4096
	}
	w, h := 1, 1
	if ratio != "" {
		if _, err := fmt.Sscanf(ratio, "%d:%d", &w, &h); err != nil || w <= 0 || h <= 0 {
			w, h = 1, 1
		}
	}
	round := func(v float64) int { return max(16, int(v/16+0.5)*16) }
	if w >= h {
		return long, round(float64(long) * float64(h) / float64(w))
	}
	return round(float64(long) * float64(w) / float64(h)), long
}

// Poll intervals and other shared figures of the task protocols.
const (
	// MaxOutputs bounds the outputs read from one task.
	MaxOutputs = 4
)

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
