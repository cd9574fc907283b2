package upstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// builtin generates everything locally, with no network.
type builtin struct {
	cfg *Config

	mu        sync.Mutex
	cancelled map[string]bool
}

// newBuiltin returns the adapter of a builtin upstream.
func newBuiltin(cfg *Config) *builtin {
	return &builtin{cfg: cfg, cancelled: map[string]bool{}}
}

// wrong returns the error of a call for another media.
func (b *builtin) wrong(want Media) error {
	return &Error{Class: ClassCapability, Upstream: b.cfg.Name, Message: fmt.Sprintf("not a %s upstream", want)}
}

// wait sleeps for the configured artificial latency.
func (b *builtin) wait(ctx context.Context) error {
	if b.cfg.Latency <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(b.cfg.Latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &Error{Class: ClassTransient, Upstream: b.cfg.Name, Message: "cancelled while generating", Err: ctx.Err()}
	case <-t.C:
		return nil
	}
}

// GenerateImage draws a deterministic picture.
func (b *builtin) GenerateImage(ctx context.Context, r ImageRequest) (*Image, error) {
	if b.cfg.Media != MediaImage {
		return nil, b.wrong(MediaImage)
	}
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	if len(r.Mask) > 0 && !b.cfg.Has(CapMask) {
		return nil, &Error{Class: ClassCapability, Upstream: b.cfg.Name, Message: "mask is not supported"}
	}
	img, err := renderImage(r)
	if err != nil {
		return nil, &Error{Class: ClassOther, Upstream: b.cfg.Name, Message: "encode image", Err: err}
	}
	return img, nil
}

// Chat answers deterministically from the prompts.
func (b *builtin) Chat(ctx context.Context, r ChatRequest) (*ChatResult, error) {
	if b.cfg.Media != MediaChat {
		return nil, b.wrong(MediaChat)
	}
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.result(r.Messages), nil
}

// result builds the answer and its token counts.
func (b *builtin) result(messages []Message) *ChatResult {
	content := chatAnswer(messages)
	prompt := 0
	for _, m := range messages {
		prompt += utf8.RuneCountInString(m.Content)/4 + 1
	}
	return &ChatResult{Content: content, PromptTokens: prompt, CompletionTokens: utf8.RuneCountInString(content)/4 + 1}
}

// pieces splits text into about n stream chunks on rune boundaries.
func pieces(text string, n int) []string {
	runes := []rune(text)
	size := max(1, (len(runes)+n-1)/n)
	var out []string
	for i := 0; i < len(runes); i += size {
		out = append(out, string(runes[i:min(len(runes), i+size)]))
	}
	return out
}

// ChatStream passes the builtin answer on in a few pieces.
func (b *builtin) ChatStream(ctx context.Context, r ChatRequest, delta func(string) error) (*ChatResult, error) {
	res, err := b.Chat(ctx, r)
	if err != nil {
		return nil, err
	}
	for _, p := range pieces(res.Content, 8) {
		if err := delta(p); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// relayRequest is the part of a chat/completions body the builtin relay reads.
type relayRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
}

// text returns the text of a message content (a string or a list of parts).
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// Relay answers an OpenAI chat/completions body with an OpenAI-shaped response (SSE when stream).
func (b *builtin) Relay(ctx context.Context, body []byte) (*http.Response, error) {
	if b.cfg.Media != MediaChat {
		return nil, b.wrong(MediaChat)
	}
	var in relayRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &Error{Class: ClassOther, Upstream: b.cfg.Name, Code: "bad_request", Message: "request body is not valid JSON", Err: err}
	}
	messages := make([]Message, 0, len(in.Messages))
	for _, m := range in.Messages {
		messages = append(messages, Message{Role: m.Role, Content: text(m.Content)})
	}
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	res := b.result(messages)
	id := fmt.Sprintf("chatcmpl-%016x", seedOf(body))
	created := time.Now().Unix()
	var out bytes.Buffer
	header := http.Header{}
	if in.Stream {
		header.Set("Content-Type", "text/event-stream")
		header.Set("Cache-Control", "no-cache")
		chunk := func(delta map[string]string, finish any) {
			data, _ := json.Marshal(map[string]any{
				"id": id, "object": "chat.completion.chunk", "created": created, "model": b.cfg.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
			})
			out.WriteString("data: ")
			out.Write(data)
			out.WriteString("\n\n")
		}
		chunk(map[string]string{"role": "assistant"}, nil)
		for _, p := range pieces(res.Content, 8) {
			chunk(map[string]string{"content": p}, nil)
		}
		chunk(map[string]string{}, "stop")
		out.WriteString("data: [DONE]\n\n")
	} else {
		header.Set("Content-Type", "application/json")
		data, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": b.cfg.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]string{"role": "assistant", "content": res.Content}}},
			"usage": map[string]int{"prompt_tokens": res.PromptTokens, "completion_tokens": res.CompletionTokens,
				"total_tokens": res.PromptTokens + res.CompletionTokens},
		})
		out.Write(data)
	}
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: io.NopCloser(&out), ContentLength: int64(out.Len()),
	}, nil
}

// ReadImage measures the picture and returns the JSON description of spec section 4.7.
func (b *builtin) ReadImage(ctx context.Context, r ReadImageRequest) (string, error) {
	if b.cfg.Media != MediaChat {
		return "", b.wrong(MediaChat)
	}
	if err := b.wait(ctx); err != nil {
		return "", err
	}
	a, err := analyse(r.Image)
	if err != nil {
		return "", &Error{Class: ClassCapability, Upstream: b.cfg.Name, Message: "unreadable image", Err: err}
	}
	data, err := json.Marshal(describe(a))
	if err != nil {
		return "", &Error{Class: ClassOther, Upstream: b.cfg.Name, Message: "encode description", Err: err}
	}
	return string(data), nil
}

// videoParams is what a builtin video task id encodes, so tasks survive a restart.
type videoParams struct {
	Prompt     string `json:"p"`
	Ratio      string `json:"r,omitempty"`
	Resolution string `json:"s,omitempty"`
	Duration   int    `json:"d"`
	StartMS    int64  `json:"t"`
	LatencyMS  int64  `json:"l,omitempty"`
}

// videoID encodes task parameters as a task id.
func videoID(p videoParams) string {
	data, _ := json.Marshal(p)
	return "bv1_" + base64.RawURLEncoding.EncodeToString(data)
}

// parseVideoID decodes a task id.
func (b *builtin) parseVideoID(id string) (videoParams, error) {
	var p videoParams
	raw, ok := strings.CutPrefix(id, "bv1_")
	data, err := base64.RawURLEncoding.DecodeString(raw)
	if !ok || err != nil || json.Unmarshal(data, &p) != nil {
		return p, &Error{Class: ClassOther, Upstream: b.cfg.Name, Status: http.StatusNotFound, Message: "unknown video id"}
	}
	return p, nil
}

// StartVideo starts a task that completes after the configured latency.
func (b *builtin) StartVideo(ctx context.Context, r VideoRequest) (*VideoTask, error) {
	if b.cfg.Media != MediaVideo {
		return nil, b.wrong(MediaVideo)
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Class: ClassTransient, Upstream: b.cfg.Name, Err: err}
	}
	p := videoParams{Prompt: r.Prompt, Ratio: r.Ratio, Resolution: r.Resolution, Duration: r.Duration,
		StartMS: time.Now().UnixMilli(), LatencyMS: b.cfg.Latency.Milliseconds()}
	t := b.status(videoID(p), p)
	return t, nil
}

// status computes the state of a task from its start time and latency.
func (b *builtin) status(id string, p videoParams) *VideoTask {
	b.mu.Lock()
	cancelled := b.cancelled[id]
	b.mu.Unlock()
	if cancelled {
		return &VideoTask{ID: id, Status: VideoFailed, Error: "cancelled"}
	}
	elapsed := time.Now().UnixMilli() - p.StartMS
	switch {
	case p.LatencyMS <= 0 || elapsed >= p.LatencyMS:
		return &VideoTask{ID: id, Status: VideoCompleted, Progress: 100}
	case elapsed < p.LatencyMS/10:
		return &VideoTask{ID: id, Status: VideoQueued}
	default:
		return &VideoTask{ID: id, Status: VideoInProgress, Progress: int(elapsed * 100 / p.LatencyMS)}
	}
}

// VideoStatus returns the state of a task.
func (b *builtin) VideoStatus(ctx context.Context, id string) (*VideoTask, error) {
	p, err := b.parseVideoID(id)
	if err != nil {
		return nil, err
	}
	return b.status(id, p), nil
}

// VideoContent renders the finished video as an MJPEG MP4 file.
func (b *builtin) VideoContent(ctx context.Context, id string) (io.ReadCloser, error) {
	p, err := b.parseVideoID(id)
	if err != nil {
		return nil, err
	}
	if t := b.status(id, p); t.Status != VideoCompleted {
		return nil, &Error{Class: ClassOther, Upstream: b.cfg.Name, Status: http.StatusConflict, Message: "video is not ready"}
	}
	data, err := renderVideo(p.Prompt, p.Ratio, p.Duration)
	if err != nil {
		return nil, &Error{Class: ClassOther, Upstream: b.cfg.Name, Message: "encode video", Err: err}
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// CancelVideo marks a task cancelled.
func (b *builtin) CancelVideo(ctx context.Context, id string) error {
	if _, err := b.parseVideoID(id); err != nil {
		return err
	}
	b.mu.Lock()
	b.cancelled[id] = true
	b.mu.Unlock()
	return nil
}

// Probe always succeeds: builtin generators need nothing outside the process.
func (b *builtin) Probe(ctx context.Context) error { return nil }

// RenderVideo returns the builtin video of a prompt: a small Motion-JPEG MP4 of the given ratio and
// duration (two frames a second, long side 320 pixels).
func RenderVideo(prompt, ratio string, seconds int) ([]byte, error) {
	return renderVideo(prompt, ratio, seconds)
}

// renderVideo draws a moving disc over a shifting gradient and wraps the frames in an MP4 file.
func renderVideo(prompt, ratio string, seconds int) ([]byte, error) {
	const fps = 2
	seconds = min(max(seconds, 1), 60)
	w, h := parseRatio(ratio)
	if ratio == "" {
		w, h = 16, 9
	}
	pw, ph := fitLongSide(w, h, 320, 16)
	seed := rng(seedOf([]byte(prompt), []byte(ratio)))
	c1, c2, disc := seed.colour(), seed.colour(), seed.colour()
	n := seconds * fps
	frames := make([][]byte, 0, n)
	img := image.NewNRGBA(image.Rect(0, 0, pw, ph))
	var buf bytes.Buffer
	for f := 0; f < n; f++ {
		phase := float64(f) / float64(n)
		for y := 0; y < ph; y++ {
			row := img.Pix[y*img.Stride:]
			for x := 0; x < pw; x++ {
				t := math.Mod(float64(x)/float64(pw)/2+float64(y)/float64(ph)/2+phase, 1)
				row[x*4+0], row[x*4+1], row[x*4+2], row[x*4+3] = lerp(c1.R, c2.R, t), lerp(c1.G, c2.G, t), lerp(c1.B, c2.B, t), 255
			}
		}
		cx := float64(pw) * (0.15 + 0.7*phase)
		cy := float64(ph) * (0.5 + 0.25*math.Sin(phase*2*math.Pi))
		rad := float64(min(pw, ph)) * 0.18
		for y := max(0, int(cy-rad)); y < min(ph, int(cy+rad)+1); y++ {
			for x := max(0, int(cx-rad)); x < min(pw, int(cx+rad)+1); x++ {
				if dx, dy := float64(x)-cx, float64(y)-cy; dx*dx+dy*dy < rad*rad {
					i := y*img.Stride + x*4
					img.Pix[i], img.Pix[i+1], img.Pix[i+2] = disc.R, disc.G, disc.B
				}
			}
		}
		buf.Reset()
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 70}); err != nil {
			return nil, err
		}
		frames = append(frames, bytes.Clone(buf.Bytes()))
	}
	return writeMJPEGMP4(frames, pw, ph, 1000/fps), nil
}
