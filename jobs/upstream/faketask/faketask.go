// Package faketask is the common part of the strict protocol fakes (jobs/upstream/<name>/fake): a
// recorder of the requests received, tasks that move queued → running → succeeded or failed as they
// are polled, scripted faults (429 with Retry-After, 5xx, a revoked key, an exhausted balance) and a
// strict JSON decoder that refuses unknown fields.
package faketask

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Request is one request received by a fake.
type Request struct {
	Method string
	Path   string // path and query
	Header http.Header
	Body   []byte
}

// JSON decodes the request's body into a map.
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// State is a task state of the fakes.
type State string

// The states a fake task goes through.
const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// Task is one task of a fake.
type Task struct {
	ID       string
	Ref      string // the client's name of the task, when the protocol has one
	Kind     string // image or video (or a protocol's own kind)
	Prompt   string
	State    State
	Polls    int    // polls answered so far
	Outcome  string // "" succeed, "fail", "refuse" (moderation of the output), "slow" (runs for ever)
	Progress int
	Created  time.Time
	// Extra holds protocol details (the model, a result URL).
	Extra map[string]string
}

// Fault is a scripted answer to the next matching requests.
type Fault struct {
	Status     int    // HTTP status
	Body       string // answer body
	RetryAfter string // Retry-After header, when set
	Path       string // only requests whose path contains it ("" any)
	Times      int    // how many requests it answers (0: one)
	// Delay holds the answer this long (until the client gives up, when sooner); with Status 0 the
	// request is then answered normally.
	Delay  time.Duration
	Method string // only requests of this method ("" any)
}

// Core is embedded by each protocol fake.
type Core struct {
	mu         sync.Mutex
	requests   []Request
	tasks      map[string]*Task
	order      []string
	faults     []*Fault
	seq        int
	runPolls   int
	queuePolls int
}

// SetPolls sets how many polls a new or unfinished task answers queued (default 1) and then running
// (default 2) before it ends.
func (c *Core) SetPolls(queued, running int) {
	c.mu.Lock()
	c.queuePolls, c.runPolls = queued, running
	c.mu.Unlock()
}

// NewCore returns an empty core.
func NewCore() *Core { return &Core{tasks: map[string]*Task{}, runPolls: 2, queuePolls: 1} }

// Record stores a request (its body is read and restored) and returns it.
func (c *Core) Record(r *http.Request) Request {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body}
	c.mu.Lock()
	c.requests = append(c.requests, rec)
	c.mu.Unlock()
	return rec
}

// Requests returns the requests received whose method matches and path contains path ("" any).
func (c *Core) Requests(method, path string) []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Request
	for _, r := range c.requests {
		if (method == "" || r.Method == method) && strings.Contains(r.Path, path) {
			out = append(out, r)
		}
	}
	return out
}

// Fail scripts a fault for the next matching requests.
func (c *Core) Fail(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	c.mu.Lock()
	c.faults = append(c.faults, &f)
	c.mu.Unlock()
}

// Fault answers a scripted fault for r when one matches; it reports whether it answered.
func (c *Core) Fault(w http.ResponseWriter, r *http.Request) bool {
	c.mu.Lock()
	var f *Fault
	for i, x := range c.faults {
		if (x.Path == "" || strings.Contains(r.URL.Path, x.Path)) && (x.Method == "" || x.Method == r.Method) {
			f = x
			x.Times--
			if x.Times <= 0 {
				c.faults = append(c.faults[:i], c.faults[i+1:]...)
			}
			break
		}
	}
	c.mu.Unlock()
	if f == nil {
		return false
	}
	if f.Delay > 0 {
		select {
		case <-r.Context().Done():
			return true
		case <-time.After(f.Delay):
		}
	}
	if f.Status == 0 {
		return false
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, f.Body)
	return true
}

// NewTask creates a queued task; the outcome follows markers in the prompt: "[fail]", "[refuse-output]"
// or "[slow]".
func (c *Core) NewTask(prefix, kind, ref, prompt string) *Task {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &Task{ID: fmt.Sprintf("%s%04d", prefix, c.seq), Ref: ref, Kind: kind, Prompt: prompt, State: Queued, Created: time.Now(), Extra: map[string]string{}}
	switch {
	case strings.Contains(prompt, "[fail]"):
		t.Outcome = "fail"
	case strings.Contains(prompt, "[refuse-output]"):
		t.Outcome = "refuse"
	case strings.Contains(prompt, "[slow]"):
		t.Outcome = "slow"
	}
	c.tasks[t.ID] = t
	c.order = append(c.order, t.ID)
	return t
}

// Poll advances a task by one poll and returns a copy of it: the first polls find it queued, the next
// ones running (progress rising), then it ends as its outcome says (SetPolls). A slow task runs for ever.
func (c *Core) Poll(id string) (Task, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tasks[id]
	if !ok {
		return Task{}, false
	}
	if t.State == Queued || t.State == Running {
		t.Polls++
		switch {
		case t.Polls <= c.queuePolls:
			t.State = Queued
		case t.Outcome == "slow" || t.Polls <= c.queuePolls+c.runPolls:
			t.State = Running
			t.Progress = min(90, 100*(t.Polls-c.queuePolls)/(c.runPolls+1))
		case t.Outcome == "fail" || t.Outcome == "refuse":
			t.State = Failed
		default:
			t.State, t.Progress = Succeeded, 100
		}
	}
	return *t, true
}

// Peek returns a copy of a task without advancing it.
func (c *Core) Peek(id string) (Task, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tasks[id]
	if !ok {
		return Task{}, false
	}
	return *t, true
}

// ByRef returns the task created with the client's reference.
func (c *Core) ByRef(ref string) (Task, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.order {
		if t := c.tasks[id]; t.Ref == ref && ref != "" {
			return *t, true
		}
	}
	return Task{}, false
}

// Cancel cancels a task that has not ended; it reports the state found and whether it was cancelled.
// onlyQueued refuses running tasks, as some providers do.
func (c *Core) Cancel(id string, onlyQueued bool) (State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tasks[id]
	if !ok {
		return "", false
	}
	if t.State == Queued || (t.State == Running && !onlyQueued) {
		t.State = Cancelled
		return Queued, true
	}
	return t.State, false
}

// Tasks returns copies of every task in creation order.
func (c *Core) Tasks() []Task {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Task, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, *c.tasks[id])
	}
	return out
}

// SetExtra sets a protocol detail of a task.
func (c *Core) SetExtra(id, key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tasks[id]; ok {
		t.Extra[key] = value
	}
}

// Strict decodes a JSON body into v and refuses unknown fields, trailing data or an empty body.
func Strict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON body")
	}
	return nil
}

// WriteJSON answers v with a status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Host is a fake provider on loopback: the task core its handlers share and its HTTP server.
type Host struct {
	*Core
	// Root is the server's own address (http://127.0.0.1:port), for the file URLs a fake hands out.
	Root string
	// URL is the base URL to configure: Root and the provider's path prefix.
	URL string
	srv *httptest.Server
}

// Start serves handler on loopback; prefix is the provider's base path ("/api/v3", or "").
func Start(handler http.HandlerFunc, prefix string) *Host {
	srv := httptest.NewServer(handler)
	return &Host{Core: NewCore(), Root: srv.URL, URL: srv.URL + prefix, srv: srv}
}

// Close stops the server.
func (h *Host) Close() { h.srv.Close() }
