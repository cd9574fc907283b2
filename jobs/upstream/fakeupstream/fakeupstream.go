// Package fakeupstream is an OpenAI-compatible HTTP server on 127.0.0.1 for tests: it serves images,
// chat (with streaming), videos and models, and can be told at run time to slow down, hang or fail.
package fakeupstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is how the server answers.
type Mode int

// The answer modes.
const (
	// Normal answers as the OpenAI API would.
	Normal Mode = iota
	// Slow waits Fault.Delay, then answers normally.
	Slow
	// Hang never answers; the request ends when the client gives up.
	Hang
	// RateLimit answers 429 with code rate_limit_exceeded.
	RateLimit
	// Quota answers 429 with code insufficient_quota.
	Quota
	// Unauthorized answers 401 invalid_api_key.
	Unauthorized
	// ServerError answers 500.
	ServerError
	// BadJSON answers 200 with a body that is not valid JSON.
	BadJSON
)

// Fault tells the server how to answer matching requests.
type Fault struct {
	Mode  Mode
	Delay time.Duration // Slow: the wait before a normal answer; other modes: the wait before the fault
	Times int           // > 0: only the next Times matching requests, then Normal again
}

// Request is what the server recorded of the last request to a path.
type Request struct {
	Channel string
	Model   string
	Header  http.Header
	Body    []byte            // JSON bodies
	Fields  map[string]string // multipart text fields
	Images  int               // multipart image[] parts
	Mask    bool              // multipart mask part present
}

// Server is a running fake upstream; create it with New and stop it with Close.
type Server struct {
	// URL is the base URL of the API, ending in /v1.
	URL string

	srv     *httptest.Server
	closing chan struct{}
	once    sync.Once

	mu           sync.Mutex
	faults       map[string]*Fault
	counts       map[string]int
	last         map[string]Request
	streamChunks int
	streamDelay  time.Duration
	videoPolls   int
	noProgress   bool
	videos       map[string]*video
	nextID       int
}

// video is a fake video task.
type video struct {
	polls int
	model string
}

// New starts a fake upstream on 127.0.0.1.
func New() *Server {
	s := &Server{
		closing:      make(chan struct{}),
		faults:       map[string]*Fault{},
		counts:       map[string]int{},
		last:         map[string]Request{},
		streamChunks: 5,
		videoPolls:   2,
		videos:       map[string]*video{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/images/generations", s.images)
	mux.HandleFunc("POST /v1/images/edits", s.edits)
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /v1/videos", s.createVideo)
	mux.HandleFunc("GET /v1/videos/{id}", s.getVideo)
	mux.HandleFunc("GET /v1/videos/{id}/content", s.videoContent)
	mux.HandleFunc("DELETE /v1/videos/{id}", s.deleteVideo)
	mux.HandleFunc("GET /v1/models", s.models)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /c/{channel}/v1/... addresses one channel so faults can target it.
		if rest, ok := strings.CutPrefix(r.URL.Path, "/c/"); ok {
			channel, path, _ := strings.Cut(rest, "/")
			r = r.WithContext(context.WithValue(r.Context(), channelKey{}, channel))
			r.URL.Path = "/" + path
		}
		mux.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL + "/v1"
	return s
}

// channelKey is the context key of the channel a request addressed.
type channelKey struct{}

// Close stops the server, releasing hanging requests.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closing) })
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// ChannelURL returns a base URL (ending in /v1) whose requests count and fail as channel.
func (s *Server) ChannelURL(channel string) string {
	return s.srv.URL + "/c/" + channel + "/v1"
}

// SetFault sets how every request without a channel or model fault is answered.
func (s *Server) SetFault(f Fault) { s.set("", f) }

// SetChannelFault sets how requests to ChannelURL(channel) are answered.
func (s *Server) SetChannelFault(channel string, f Fault) { s.set("channel:"+channel, f) }

// SetModelFault sets how requests naming model are answered.
func (s *Server) SetModelFault(model string, f Fault) { s.set("model:"+model, f) }

// set stores a fault under key.
func (s *Server) set(key string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Mode == Normal && f.Delay == 0 {
		delete(s.faults, key)
		return
	}
	s.faults[key] = &f
}

// ClearFaults makes every request answer normally again.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[string]*Fault{}
}

// SetStream sets how many content chunks a streamed completion has and the delay before each.
func (s *Server) SetStream(chunks int, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamChunks, s.streamDelay = max(chunks, 1), delay
}

// SetVideoPolls sets how many status requests a video needs before it is completed.
func (s *Server) SetVideoPolls(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.videoPolls = max(n, 1)
}

// SetVideoProgressReported sets whether video status answers carry a progress figure (the default) or
// none, like upstreams that only say queued, in_progress and completed.
func (s *Server) SetVideoProgressReported(reported bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noProgress = !reported
}

// Count returns how many requests reached a path pattern over every channel, such as
// "/v1/images/generations" or "/v1/videos/{id}".
func (s *Server) Count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[path]
}

// ChannelCount returns how many requests reached a path pattern through ChannelURL(channel).
func (s *Server) ChannelCount(channel, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[channel+" "+path]
}

// LastRequest returns the last request recorded for a path pattern.
func (s *Server) LastRequest(path string) Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[path]
}

// Reset clears counts, recorded requests and faults.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = map[string]int{}
	s.last = map[string]Request{}
	s.faults = map[string]*Fault{}
}

// begin counts and records a request and returns the fault that applies to it.
func (s *Server) begin(r *http.Request, rec Request) Fault {
	channel, _ := r.Context().Value(channelKey{}).(string)
	rec.Channel = channel
	rec.Header = r.Header.Clone()
	path := r.Pattern
	if _, p, ok := strings.Cut(path, " "); ok {
		path = p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[path]++
	if channel != "" {
		s.counts[channel+" "+path]++
	}
	s.last[path] = rec
	for _, key := range []string{"channel:" + channel, "model:" + rec.Model, ""} {
		if key == "channel:" && channel == "" || key == "model:" && rec.Model == "" {
			continue
		}
		f, ok := s.faults[key]
		if !ok {
			continue
		}
		out := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				delete(s.faults, key)
			}
		}
		return out
	}
	return Fault{}
}

// fail applies a fault; it returns true when the request has been answered (or abandoned).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, f Fault) bool {
	errorBody := func(status int, message, typ, code string) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		body := map[string]any{"error": map[string]any{"message": message, "type": typ, "code": code}}
		if code == "" {
			body["error"].(map[string]any)["code"] = nil
		}
		_ = json.NewEncoder(w).Encode(body)
		return true
	}
	if f.Mode != Slow && f.Mode != Hang && f.Delay > 0 && !s.sleep(r, f.Delay) {
		return true
	}
	switch f.Mode {
	case Slow:
		return !s.sleep(r, f.Delay)
	case Hang:
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return true
	case RateLimit:
		return errorBody(http.StatusTooManyRequests, "Rate limit reached for requests", "requests", "rate_limit_exceeded")
	case Quota:
		return errorBody(http.StatusTooManyRequests, "You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", "insufficient_quota")
	case Unauthorized:
		return errorBody(http.StatusUnauthorized, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
	case ServerError:
		return errorBody(http.StatusInternalServerError, "The server had an error while processing your request.", "server_error", "")
	case BadJSON:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data": [{"b64_json": "iVBOR`)
		return true
	}
	return false
}

// sleep waits d unless the client or the server goes away; it reports whether it waited fully.
func (s *Server) sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closing:
		return false
	}
}

// readJSON reads a JSON body and returns it with its decoded top-level fields.
func readJSON(r *http.Request) ([]byte, map[string]any) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	if m == nil {
		m = map[string]any{}
	}
	return body, m
}

// str returns a string field of a decoded body.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// writeJSON answers 200 with v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// pngCache holds the 256 pictures PNG draws from, encoded once each.
var pngCache [256]atomic.Pointer[[]byte]

// PNG returns a small real PNG picture whose colour depends on seed (one of 256 variants, encoded once).
func PNG(seed string) []byte {
	h := fnv.New32a()
	h.Write([]byte(seed))
	v := h.Sum32() & 0xff
	if b := pngCache[v].Load(); b != nil {
		return *b
	}
	b := renderPNG(v * 0x010101)
	pngCache[v].Store(&b)
	return b
}

func renderPNG(v uint32) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	c := color.NRGBA{uint8(v), uint8(v >> 8), uint8(v >> 16), 255}
	for y := 0; y < 64; y++ {
		for x := 0; x < 64; x++ {
			img.SetNRGBA(x, y, color.NRGBA{c.R ^ uint8(x*4), c.G ^ uint8(y*4), c.B, 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

// imageAnswer is the OpenAI images answer around one PNG.
func imageAnswer(seed string) map[string]any {
	return map[string]any{
		"created": time.Now().Unix(),
		"data":    []any{map[string]any{"b64_json": base64.StdEncoding.EncodeToString(PNG(seed))}},
	}
}

// images serves POST /v1/images/generations.
func (s *Server) images(w http.ResponseWriter, r *http.Request) {
	body, m := readJSON(r)
	f := s.begin(r, Request{Model: str(m, "model"), Body: body})
	if s.fail(w, r, f) {
		return
	}
	writeJSON(w, imageAnswer(str(m, "prompt")+str(m, "size")))
}

// edits serves POST /v1/images/edits (multipart).
func (s *Server) edits(w http.ResponseWriter, r *http.Request) {
	rec := Request{Fields: map[string]string{}}
	if err := r.ParseMultipartForm(32 << 20); err == nil && r.MultipartForm != nil {
		for k, v := range r.MultipartForm.Value {
			if len(v) > 0 {
				rec.Fields[k] = v[0]
			}
		}
		rec.Images = len(r.MultipartForm.File["image[]"])
		rec.Mask = len(r.MultipartForm.File["mask"]) > 0
	}
	rec.Model = rec.Fields["model"]
	f := s.begin(r, rec)
	if s.fail(w, r, f) {
		return
	}
	if rec.Images == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"image[] is required","type":"invalid_request_error","code":"missing_image"}}`)
		return
	}
	writeJSON(w, imageAnswer(fmt.Sprintf("%s/%d", rec.Fields["prompt"], rec.Images)))
}

// chat serves POST /v1/chat/completions, streaming when asked.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, m := readJSON(r)
	model := str(m, "model")
	f := s.begin(r, Request{Model: model, Body: body})
	if s.fail(w, r, f) {
		return
	}
	content := "fake reply"
	if rf, ok := m["response_format"].(map[string]any); ok && rf["type"] == "json_object" {
		content = `{"title":"fake title","body":"fake body","hashtags":["fake"]}`
	}
	if stream, _ := m["stream"].(bool); !stream {
		writeJSON(w, map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": content}}},
			"usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
		return
	}
	s.mu.Lock()
	chunks, delay := s.streamChunks, s.streamDelay
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(delta map[string]any, finish any) {
		data, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		fmt.Fprintf(w, "data: %s\n\n", data)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(map[string]any{"role": "assistant"}, nil)
	for i := 0; i < chunks; i++ {
		if !s.sleep(r, delay) {
			return
		}
		send(map[string]any{"content": fmt.Sprintf("chunk-%d ", i)}, nil)
	}
	send(map[string]any{}, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// videoObject returns the Videos API shape of a task.
func (s *Server) videoObject(id string, v *video) map[string]any {
	status, progress := "queued", 0
	switch {
	case v.polls >= s.videoPolls:
		status, progress = "completed", 100
	case v.polls > 0:
		status, progress = "in_progress", v.polls*100/s.videoPolls
	}
	if s.noProgress {
		return map[string]any{"id": id, "object": "video", "status": status, "model": v.model}
	}
	return map[string]any{"id": id, "object": "video", "status": status, "progress": progress, "model": v.model}
}

// createVideo serves POST /v1/videos.
func (s *Server) createVideo(w http.ResponseWriter, r *http.Request) {
	body, m := readJSON(r)
	f := s.begin(r, Request{Model: str(m, "model"), Body: body})
	if s.fail(w, r, f) {
		return
	}
	s.mu.Lock()
	s.nextID++
	id := fmt.Sprintf("video_%d", s.nextID)
	v := &video{model: str(m, "model")}
	s.videos[id] = v
	obj := s.videoObject(id, v)
	s.mu.Unlock()
	writeJSON(w, obj)
}

// notFound answers 404 in the OpenAI error shape.
func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `{"error":{"message":"video not found","type":"invalid_request_error","code":"not_found"}}`)
}

// getVideo serves GET /v1/videos/{id}; each poll advances the task.
func (s *Server) getVideo(w http.ResponseWriter, r *http.Request) {
	f := s.begin(r, Request{})
	if s.fail(w, r, f) {
		return
	}
	s.mu.Lock()
	v, ok := s.videos[r.PathValue("id")]
	var obj map[string]any
	if ok {
		v.polls++
		obj = s.videoObject(r.PathValue("id"), v)
	}
	s.mu.Unlock()
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, obj)
}

// MP4 is the tiny video file the fake server returns as video content.
var MP4 = append([]byte("\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2"), []byte("\x00\x00\x00\x08free")...)

// videoContent serves GET /v1/videos/{id}/content.
func (s *Server) videoContent(w http.ResponseWriter, r *http.Request) {
	f := s.begin(r, Request{})
	if s.fail(w, r, f) {
		return
	}
	s.mu.Lock()
	v, ok := s.videos[r.PathValue("id")]
	done := ok && v.polls >= s.videoPolls
	s.mu.Unlock()
	if !done {
		notFound(w)
		return
	}
	w.Header().Set("Content-Type", "video/mp4")
	_, _ = w.Write(MP4)
}

// deleteVideo serves DELETE /v1/videos/{id}.
func (s *Server) deleteVideo(w http.ResponseWriter, r *http.Request) {
	f := s.begin(r, Request{})
	if s.fail(w, r, f) {
		return
	}
	s.mu.Lock()
	_, ok := s.videos[r.PathValue("id")]
	delete(s.videos, r.PathValue("id"))
	s.mu.Unlock()
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, map[string]any{"id": r.PathValue("id"), "object": "video.deleted", "deleted": true})
}

// models serves GET /v1/models.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	f := s.begin(r, Request{})
	if s.fail(w, r, f) {
		return
	}
	writeJSON(w, map[string]any{"object": "list", "data": []any{
		map[string]any{"id": "fake-image", "object": "model"},
		map[string]any{"id": "fake-chat", "object": "model"},
	}})
}
