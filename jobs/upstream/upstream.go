package upstream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// ImageRequest asks an image upstream for one picture.
type ImageRequest struct {
	Prompt     string
	Ratio      string // width:height such as 3:4; empty means 1:1
	Resolution string // 1k (default), 2k or 4k
	Quality    string // low, medium, high; sent only to upstreams with the quality capability
	Background string // transparent or opaque; transparent forces PNG
	// ReferenceImages are the bytes of reference pictures (image-to-image).
	ReferenceImages [][]byte
	// Image and Mask are the base picture and mask of an inpainting request.
	Image []byte
	Mask  []byte
}

// Image is a generated picture.
type Image struct {
	Data []byte
	MIME string // image/png or image/jpeg
}

// ImageGenerator is implemented by image upstreams.
type ImageGenerator interface {
	// GenerateImage produces one picture.
	GenerateImage(ctx context.Context, req ImageRequest) (*Image, error)
}

// Message is one chat message with plain text content.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest asks a chat upstream for one completion.
type ChatRequest struct {
	Messages    []Message
	MaxTokens   int      // 0 lets the upstream decide
	Temperature *float64 // nil lets the upstream decide
	JSON        bool     // ask for a JSON object answer
}

// ChatResult is a finished completion.
type ChatResult struct {
	Content          string
	PromptTokens     int
	CompletionTokens int
}

// ReadImageRequest asks a chat upstream to describe a picture.
type ReadImageRequest struct {
	Image       []byte
	MIME        string // image/png, image/jpeg or image/webp
	Instruction string // system prompt that says what to return
}

// Chatter is implemented by chat upstreams; it serves copy, chat, spec expansion and image reading.
type Chatter interface {
	// Chat returns one completion.
	Chat(ctx context.Context, req ChatRequest) (*ChatResult, error)
	// ChatStream streams a completion, calling delta with each piece of text in order.
	ChatStream(ctx context.Context, req ChatRequest, delta func(string) error) (*ChatResult, error)
	// Relay sends an OpenAI chat/completions body as is (with the upstream's model) and returns the
	// upstream response on a 2xx status; the caller must close its body.
	Relay(ctx context.Context, body []byte) (*http.Response, error)
	// ReadImage returns the upstream's text (normally JSON) describing a picture.
	ReadImage(ctx context.Context, req ReadImageRequest) (string, error)
}

// VideoRequest asks a video upstream to start one video.
type VideoRequest struct {
	Prompt        string
	Tier          string // tier code; sent as the model unless the upstream config names one
	Ratio         string // such as 16:9
	Resolution    string // 480p, 720p, 1080p, 768P, 2K
	Duration      int    // seconds
	Images        []string
	Videos        []string
	Audios        []string
	GenerateAudio bool
}

// Video task statuses of the OpenAI Videos API.
const (
	VideoQueued     = "queued"
	VideoInProgress = "in_progress"
	VideoCompleted  = "completed"
	VideoFailed     = "failed"
)

// VideoTask is the state of a video at its upstream.
type VideoTask struct {
	ID       string
	Status   string // queued, in_progress, completed, failed
	Progress int    // 0..100
	Error    string // upstream detail when failed; for logs only
}

// VideoGenerator is implemented by video upstreams.
type VideoGenerator interface {
	// StartVideo submits a video and returns its upstream task.
	StartVideo(ctx context.Context, req VideoRequest) (*VideoTask, error)
	// VideoStatus returns the current state of a task.
	VideoStatus(ctx context.Context, id string) (*VideoTask, error)
	// VideoContent returns the finished video file; the caller must close it.
	VideoContent(ctx context.Context, id string) (io.ReadCloser, error)
	// CancelVideo cancels or deletes a task.
	CancelVideo(ctx context.Context, id string) error
}

// Prober checks that an upstream answers.
type Prober interface {
	// Probe returns nil when the upstream is usable.
	Probe(ctx context.Context) error
}

// adapter is what every protocol implements; the media-specific methods of the wrong media fail.
type adapter interface {
	ImageGenerator
	Chatter
	VideoGenerator
	Prober
}

// Upstream is one configured channel with its adapter; it is immutable once built.
type Upstream struct {
	Config
	caps    uint32
	adapter adapter
	tasks   TaskAdapter // the task protocol's adapter; for openai and builtin video, a view of adapter
}

// New builds an upstream and its adapter from a config.
func New(cfg Config) (*Upstream, error) {
	if cfg.SoftTimeout <= 0 {
		cfg.SoftTimeout = DefaultSoftTimeout
	}
	u := &Upstream{Config: cfg, caps: CapabilityMask(cfg.Capabilities)}
	switch cfg.Protocol {
	case ProtocolOpenAI:
		u.adapter = newOpenAI(&u.Config)
	case ProtocolBuiltin:
		u.adapter = newBuiltin(&u.Config)
	default:
		spec, ok := protocolSpec(cfg.Protocol)
		if !ok {
			return nil, fmt.Errorf("upstream %s: unknown protocol %q", cfg.Name, cfg.Protocol)
		}
		if u.BaseURL == "" {
			u.BaseURL = spec.DefaultBaseURL
		}
		t, err := spec.New(&u.Config)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", cfg.Name, err)
		}
		u.tasks = t
		u.adapter = taskOnly{name: cfg.Name, t: t}
		return u, nil
	}
	if cfg.Media == MediaVideo {
		u.tasks = videoTasks{u.adapter}
	}
	return u, nil
}

// Tasks returns the adapter of the one task path (jobs/tasks.go): the task protocol's, or for an
// openai or builtin video upstream a view of its video calls; nil for openai and builtin images and
// chat, which answer in one call.
func (u *Upstream) Tasks() TaskAdapter { return u.tasks }

// taskOnly answers the one-call interfaces of a task protocol's upstream: they are not served.
type taskOnly struct {
	name string
	t    TaskAdapter
}

func (a taskOnly) unsupported() error {
	return &Error{Class: ClassCapability, Upstream: a.name, Message: "served through upstream tasks only"}
}

func (a taskOnly) GenerateImage(context.Context, ImageRequest) (*Image, error) {
	return nil, a.unsupported()
}
func (a taskOnly) Chat(context.Context, ChatRequest) (*ChatResult, error) {
	return nil, a.unsupported()
}
func (a taskOnly) ChatStream(context.Context, ChatRequest, func(string) error) (*ChatResult, error) {
	return nil, a.unsupported()
}
func (a taskOnly) Relay(context.Context, []byte) (*http.Response, error) { return nil, a.unsupported() }
func (a taskOnly) ReadImage(context.Context, ReadImageRequest) (string, error) {
	return "", a.unsupported()
}
func (a taskOnly) StartVideo(context.Context, VideoRequest) (*VideoTask, error) {
	return nil, a.unsupported()
}
func (a taskOnly) VideoStatus(context.Context, string) (*VideoTask, error) {
	return nil, a.unsupported()
}
func (a taskOnly) VideoContent(context.Context, string) (io.ReadCloser, error) {
	return nil, a.unsupported()
}
func (a taskOnly) CancelVideo(ctx context.Context, id string) error {
	return a.t.Cancel(ctx, MediaVideo, id)
}
func (a taskOnly) Probe(ctx context.Context) error { return a.t.Probe(ctx) }

// videoTasks shows the video calls of an openai or builtin upstream as a task adapter.
type videoTasks struct{ a adapter }

func (v videoTasks) Submit(ctx context.Context, req TaskRequest) (*Task, error) {
	t, err := v.a.StartVideo(ctx, req.Video)
	if err != nil {
		return nil, err
	}
	return fromVideoTask(t), nil
}

func (v videoTasks) Poll(ctx context.Context, _ Media, id string) (*Task, error) {
	t, err := v.a.VideoStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	return fromVideoTask(t), nil
}

func (v videoTasks) Cancel(ctx context.Context, _ Media, id string) error {
	return v.a.CancelVideo(ctx, id)
}

// Open downloads the video content of the task named by the output's URL (the task id).
func (v videoTasks) Open(ctx context.Context, out Output) (io.ReadCloser, error) {
	return v.a.VideoContent(ctx, out.URL)
}

func (v videoTasks) Probe(ctx context.Context) error { return v.a.Probe(ctx) }

// fromVideoTask maps an OpenAI Videos API task; a completed one has one output naming the task.
func fromVideoTask(t *VideoTask) *Task {
	out := &Task{ID: t.ID, Progress: t.Progress}
	switch t.Status {
	case VideoCompleted:
		out.Status = TaskSucceeded
		out.Outputs = []Output{{URL: t.ID}}
	case VideoFailed:
		out.Status = TaskFailed
		out.Err = &Error{Class: ClassOther, Message: t.Error}
	case VideoInProgress:
		out.Status = TaskRunning
	default:
		out.Status = TaskQueued
	}
	return out
}

// CapMask returns the bit mask of the upstream's capabilities (see CapabilityMask).
func (u *Upstream) CapMask() uint32 { return u.caps }

// Image returns the image adapter.
func (u *Upstream) Image() ImageGenerator { return u.adapter }

// Chat returns the chat adapter.
func (u *Upstream) Chat() Chatter { return u.adapter }

// Video returns the video adapter.
func (u *Upstream) Video() VideoGenerator { return u.adapter }

// Probe checks that the upstream answers (GET /models for openai; always nil for builtin).
func (u *Upstream) Probe(ctx context.Context) error { return u.adapter.Probe(ctx) }

// Registry holds the current set of upstreams and swaps it atomically on reload.
type Registry struct {
	set atomic.Pointer[Set]
}

// Set is one immutable generation of upstreams.
type Set struct {
	All       []*Upstream
	byName    map[string]*Upstream
	families  map[Media]map[string]bool
	providers map[Media]map[string]bool
}

// ByName returns the upstream called name, or nil.
func (s *Set) ByName(name string) *Upstream { return s.byName[name] }

// HasFamily reports whether some upstream of media m belongs to family.
func (s *Set) HasFamily(m Media, family string) bool { return s.families[m][family] }

// HasProvider reports whether some upstream of media m comes from provider.
func (s *Set) HasProvider(m Media, provider string) bool { return s.providers[m][provider] }

// NewSet builds upstreams from configs.
func NewSet(cfgs []Config) (*Set, error) {
	if err := Validate(cfgs); err != nil {
		return nil, err
	}
	s := &Set{
		byName:    make(map[string]*Upstream, len(cfgs)),
		families:  map[Media]map[string]bool{},
		providers: map[Media]map[string]bool{},
	}
	for _, c := range cfgs {
		u, err := New(c)
		if err != nil {
			return nil, err
		}
		s.All = append(s.All, u)
		s.byName[u.Name] = u
		if s.families[u.Media] == nil {
			s.families[u.Media] = map[string]bool{}
			s.providers[u.Media] = map[string]bool{}
		}
		if u.Family != "" {
			s.families[u.Media][u.Family] = true
		}
		s.providers[u.Media][u.Provider] = true
	}
	return s, nil
}

// NewRegistry returns a registry holding upstreams built from cfgs.
func NewRegistry(cfgs []Config) (*Registry, error) {
	r := &Registry{}
	if err := r.Replace(cfgs); err != nil {
		return nil, err
	}
	return r, nil
}

// LoadRegistry returns a registry from the upstreams file at path, or the builtin upstreams when
// path is empty.
func LoadRegistry(path string) (*Registry, error) {
	if path == "" {
		return NewRegistry(BuiltinUpstreams())
	}
	cfgs, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	return NewRegistry(cfgs)
}

// Replace swaps in upstreams built from cfgs; work in flight keeps the upstreams it holds.
func (r *Registry) Replace(cfgs []Config) error {
	s, err := NewSet(cfgs)
	if err != nil {
		return err
	}
	r.set.Store(s)
	return nil
}

// Reload reads the upstreams file at path and swaps it in; on error the current set stays.
func (r *Registry) Reload(path string) error {
	cfgs, err := LoadFile(path)
	if err != nil {
		return err
	}
	return r.Replace(cfgs)
}

// Current returns the current generation of upstreams.
func (r *Registry) Current() *Set {
	if s := r.set.Load(); s != nil {
		return s
	}
	return &Set{}
}

// Watch reloads the upstreams file at path whenever its modification time or size changes, checking
// every interval until ctx ends; a rejected file is logged and the current upstreams stay.
func (r *Registry) Watch(ctx context.Context, path string, every time.Duration) {
	if every <= 0 {
		every = 5 * time.Second
	}
	stamp := func() (time.Time, int64) {
		fi, err := os.Stat(path)
		if err != nil {
			return time.Time{}, -1
		}
		return fi.ModTime(), fi.Size()
	}
	mod, size := stamp()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, s := stamp()
		if s < 0 || (m.Equal(mod) && s == size) {
			continue
		}
		mod, size = m, s
		if err := r.Reload(path); err != nil {
			slog.Error("upstreams: file changed but was rejected; keeping the current upstreams", "path", path, "err", err)
			continue
		}
		slog.Info("upstreams: reloaded", "path", path, "count", len(r.Current().All))
	}
}
