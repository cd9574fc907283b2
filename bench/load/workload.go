package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"studio/bench/internal/benchapi"
	"sync"
	"sync/atomic"
	"time"

	"studio/jobs/upstream/fakeupstream"
)

// defaultMix is the share of each endpoint in the default workload: mostly image submits and job polls,
// chat both ways, some uploads and video tasks, and a few console pages.
const defaultMix = "generate=20,generate-batch=5,job=20,jobs-list=8,video=2,video-poll=6," +
	"chat=12,chat-stream=12,upload=6,console=4,console-jobs=5"

// endpointNames lists every endpoint of the workload in the order of the report.
var endpointNames = []string{"generate", "generate-batch", "job", "jobs-list", "video", "video-poll",
	"chat", "chat-stream", "upload", "console", "console-jobs"}

// endpoint is one kind of request of the mix with what it measured.
type endpoint struct {
	name   string
	weight float64
	call   func(ctx context.Context) error

	mu      sync.Mutex
	lat     []time.Duration   // from the scheduled start to the end of the answer, errors included
	errs    map[string]int    // error label -> count
	samples map[string]string // error label -> the first answer or message seen
}

// record adds the outcome of one request.
func (e *endpoint) record(d time.Duration, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lat = append(e.lat, d)
	if err != nil {
		e.fail(err)
	}
}

// drop counts an arrival that found the generator's queue full: it was never sent.
func (e *endpoint) drop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail(errDropped)
}

// fail counts an error under its label; the caller holds e.mu.
func (e *endpoint) fail(err error) {
	label := errorLabel(err)
	if e.errs == nil {
		e.errs, e.samples = map[string]int{}, map[string]string{}
	}
	if e.errs[label] == 0 {
		e.samples[label] = err.Error()
	}
	e.errs[label]++
}

// errDropped is the error of an arrival dropped because the generator's queue was full.
var errDropped = errors.New("dropped: every in-flight slot busy and the queue full")

// statusError is an answer with an unexpected status.
type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.body) }

// errorLabel is the short name an error is counted under: its status, "transport" or "dropped".
func errorLabel(err error) string {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return strconv.Itoa(se.status)
	case errors.Is(err, errDropped):
		return "dropped"
	case errors.Is(err, errBadAnswer):
		return "bad answer"
	default:
		return "transport"
	}
}

// errBadAnswer wraps a 200 answer that is not what the endpoint promises.
var errBadAnswer = errors.New("bad answer")

// ids keeps the most recent ids of a kind (jobs, video tasks) for the polling endpoints.
type ids struct {
	mu   sync.Mutex
	ring []string
	next int
}

// idsKept bounds how many recent ids are kept: polls go to recent work, as clients' polls do.
const idsKept = 1024

// add remembers an id, forgetting the oldest beyond idsKept.
func (r *ids) add(id string) {
	if id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ring) < idsKept {
		r.ring = append(r.ring, id)
		return
	}
	r.ring[r.next] = id
	r.next = (r.next + 1) % idsKept
}

// pick returns one of the kept ids at random, or "" when none is known yet.
func (r *ids) pick() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ring) == 0 {
		return ""
	}
	return r.ring[rand.IntN(len(r.ring))]
}

// client calls studio as one tenant: REST with its key, console pages with a session signed in with it.
type client struct {
	base    string
	key     string
	batch   int
	http    *http.Client
	browser *http.Client // with the session cookie
	jobs    ids
	videos  ids
	seq     atomic.Int64
}

// newClient returns a client of the tenant key over transport.
func newClient(base, key string, batch int, transport http.RoundTripper, timeout time.Duration) *client {
	jar, _ := cookiejar.New(nil)
	return &client{base: base, key: key, batch: batch,
		http: &http.Client{Transport: transport, Timeout: timeout},
		browser: &http.Client{Transport: transport, Timeout: timeout, Jar: jar,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// parseMix reads endpoint weights ("name=weight,..."); endpoints not named weigh 0.
func parseMix(mix string) (map[string]float64, error) {
	weights := map[string]float64{}
	for part := range strings.SplitSeq(mix, ",") {
		name, raw, ok := strings.Cut(strings.TrimSpace(part), "=")
		w, err := strconv.ParseFloat(raw, 64)
		if !ok || err != nil || w < 0 {
			return nil, fmt.Errorf("mix: %q is not name=weight (a number >= 0)", part)
		}
		if !slices.Contains(endpointNames, name) {
			return nil, fmt.Errorf("mix: no endpoint %q (endpoints: %s)", name, strings.Join(endpointNames, ", "))
		}
		weights[name] = w
	}
	for _, w := range weights {
		if w > 0 {
			return weights, nil
		}
	}
	return nil, errors.New("mix: no endpoint has a positive weight")
}

// endpoints returns the endpoints of the workload that have a positive weight.
func (c *client) endpoints(weights map[string]float64) []*endpoint {
	calls := map[string]func(context.Context) error{
		"generate":       c.generate,
		"generate-batch": c.generateBatch,
		"job":            c.job,
		"jobs-list":      c.jobsList,
		"video":          c.video,
		"video-poll":     c.videoPoll,
		"chat":           func(ctx context.Context) error { return c.chat(ctx, false) },
		"chat-stream":    func(ctx context.Context) error { return c.chat(ctx, true) },
		"upload":         c.upload,
		"console":        func(ctx context.Context) error { return c.page(ctx, "/console") },
		"console-jobs":   func(ctx context.Context) error { return c.page(ctx, "/console/jobs") },
	}
	var out []*endpoint
	for _, name := range endpointNames {
		if weights[name] > 0 {
			out = append(out, &endpoint{name: name, weight: weights[name], call: calls[name]})
		}
	}
	return out
}

// do sends a request and reads the whole answer; an answer other than 200 is a *statusError.
func do(hc *http.Client, req *http.Request) ([]byte, error) {
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return body, &statusError{status: res.StatusCode, body: snippet(body)}
	}
	return body, nil
}

// snippet shortens an answer for an error sample.
func snippet(b []byte) string { return benchapi.Snippet(b, 160) }

// api sends a JSON request with the tenant key and decodes a 200 answer into out (when not nil).
func (c *client) api(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", c.key)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	b, err := do(c.http, req)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%w: %v: %s", errBadAnswer, err, snippet(b))
	}
	return nil
}

// prompt returns a fresh prompt, so that no two submits are alike.
func (c *client) prompt() string {
	return fmt.Sprintf("load test poster %d: a lighthouse at dusk", c.seq.Add(1))
}

// generate submits one image job (POST /api/generate).
func (c *client) generate(ctx context.Context) error {
	var out struct {
		JobID string `json:"jobId"`
	}
	if err := c.api(ctx, "POST", "/api/generate", map[string]any{"prompt": c.prompt()}, &out); err != nil {
		return err
	}
	if out.JobID == "" {
		return fmt.Errorf("%w: no jobId", errBadAnswer)
	}
	c.jobs.add(out.JobID)
	return nil
}

// generateBatch submits c.batch image jobs in one call (POST /api/generate-batch).
func (c *client) generateBatch(ctx context.Context) error {
	items := make([]map[string]any, c.batch)
	for i := range items {
		items[i] = map[string]any{"prompt": c.prompt()}
	}
	var out struct {
		Jobs []struct {
			JobID string `json:"jobId"`
		} `json:"jobs"`
	}
	if err := c.api(ctx, "POST", "/api/generate-batch", map[string]any{"items": items}, &out); err != nil {
		return err
	}
	if len(out.Jobs) != len(items) {
		return fmt.Errorf("%w: %d jobs for %d items", errBadAnswer, len(out.Jobs), len(items))
	}
	for _, j := range out.Jobs {
		c.jobs.add(j.JobID)
	}
	return nil
}

// job reads one recent job (GET /api/jobs?id=).
func (c *client) job(ctx context.Context) error {
	return c.api(ctx, "GET", "/api/jobs?id="+url.QueryEscape(c.jobs.pick()), nil, nil)
}

// jobsList reads the first page of the tenant's jobs (GET /api/jobs).
func (c *client) jobsList(ctx context.Context) error {
	return c.api(ctx, "GET", "/api/jobs?limit=20", nil, nil)
}

// video submits a 5-second video task on the default tier (POST /api/videos).
func (c *client) video(ctx context.Context) error {
	var out struct {
		ID string `json:"id"`
	}
	if err := c.api(ctx, "POST", "/api/videos", map[string]any{"prompt": c.prompt(), "duration": 5}, &out); err != nil {
		return err
	}
	if out.ID == "" {
		return fmt.Errorf("%w: no id", errBadAnswer)
	}
	c.videos.add(out.ID)
	return nil
}

// videoPoll reads one recent video task (GET /api/videos?id=).
func (c *client) videoPoll(ctx context.Context) error {
	return c.api(ctx, "GET", "/api/videos?id="+url.QueryEscape(c.videos.pick()), nil, nil)
}

// chatBody is a small chat completions request.
func chatBody(stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": "service-auto", "stream": stream, "messages": []any{
		map[string]any{"role": "system", "content": "You write short poster captions."},
		map[string]any{"role": "user", "content": "One line for a lighthouse at dusk."}}})
	return b
}

// chat calls POST /api/chat/completions; a stream is read to its end and must end with data: [DONE].
func (c *client) chat(ctx context.Context, stream bool) error {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/api/chat/completions", bytes.NewReader(chatBody(stream)))
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", c.key)
	req.Header.Set("Content-Type", "application/json")
	if !stream {
		_, err := do(c.http, req)
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return &statusError{status: res.StatusCode, body: snippet(b)}
	}
	done := false
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if sc.Text() == "data: [DONE]" {
			done = true
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("%w: the stream did not end with data: [DONE]", errBadAnswer)
	}
	return nil
}

// upload posts a small PNG as multipart field file (POST /api/upload-ref).
func (c *client) upload(ctx context.Context) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "reference.png")
	_, _ = fw.Write(fakeupstream.PNG(strconv.FormatInt(c.seq.Add(1), 10)))
	_ = mw.Close()
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/api/upload-ref", &buf)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", c.key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	_, err = do(c.http, req)
	return err
}

// page reads a console page with the session cookie.
func (c *client) page(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return err
	}
	_, err = do(c.browser, req)
	return err
}

// formTokenRE finds the sign-in form's token in the page.
var formTokenRE = regexp.MustCompile(`name="form_token" value="([^"]+)"`)

// signIn opens a console session with the tenant key as a browser does: GET /login sets the
// pre-session cookie and carries the form token, POST /login answers 303 with the session cookie.
func (c *client) signIn(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/login", nil)
	page, err := do(c.browser, req)
	if err != nil {
		return fmt.Errorf("sign-in page: %w", err)
	}
	m := formTokenRE.FindSubmatch(page)
	if m == nil {
		return errors.New("sign-in page: no form_token")
	}
	form := url.Values{"form_token": {string(m[1])}, "method": {"key"}, "key": {c.key}}
	req, _ = http.NewRequestWithContext(ctx, "POST", c.base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := c.browser.Do(req)
	if err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("sign in: status %d, want 303: %s", res.StatusCode, snippet(b))
	}
	return nil
}

// arrival is one scheduled request.
type arrival struct {
	ep *endpoint
	at time.Time // when it was due: its latency counts from here
}

// drive runs the open-loop workload: arrivals are due at a fixed rate, evenly spaced, each going to an
// endpoint chosen at random by weight. At most inflight requests run at once; an arrival that finds
// every slot busy waits in a queue of at most queue arrivals, and beyond that is dropped and counted as
// an error. Latency is measured from when the arrival was due, not from when a slot took it, so that a
// slow server cannot hide its slowness by holding the generator back (coordinated omission).
// drive returns when every sent request has ended. When tl is not nil, every outcome is also counted
// in the timeline slice of its due time.
func drive(ctx context.Context, eps []*endpoint, rate float64, duration time.Duration, inflight, queue int, tl *timeline) {
	var total float64
	for _, e := range eps {
		total += e.weight
	}
	cum := make([]float64, len(eps))
	acc := 0.0
	for i, e := range eps {
		acc += e.weight / total
		cum[i] = acc
	}
	rng := rand.New(rand.NewPCG(1, 2)) // the same sequence of endpoints every run
	pick := func() *endpoint {
		x := rng.Float64()
		i := sort.SearchFloat64s(cum, x)
		return eps[min(i, len(eps)-1)]
	}

	start := time.Now()
	end := start.Add(duration)
	if tl != nil {
		tl.start = start
	}
	arrivals := make(chan arrival, queue)
	var wg sync.WaitGroup
	for range inflight {
		wg.Go(func() {
			for a := range arrivals {
				err := a.ep.call(ctx)
				d := time.Since(a.at)
				a.ep.record(d, err)
				tl.record(a.at, d, err != nil)
			}
		})
	}
	interval := float64(time.Second) / rate
	for i := 0; ; i++ {
		at := start.Add(time.Duration(float64(i) * interval))
		if !at.Before(end) {
			break
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		a := arrival{ep: pick(), at: at}
		select {
		case arrivals <- a:
		default:
			a.ep.drop()
			tl.drop(at)
		}
	}
	close(arrivals)
	wg.Wait()
}

// timeline counts outcomes by the slice of the run they were due in, to show how latency evolves.
type timeline struct {
	every time.Duration
	start time.Time // set by drive

	mu     sync.Mutex
	slices []timeSlice
}

// timeSlice is what the requests due in one slice of the run measured.
type timeSlice struct {
	lat     []time.Duration
	errors  int // dropped arrivals included
	dropped int
}

// slice returns the slice of a due time, growing the timeline; the caller holds tl.mu.
func (tl *timeline) slice(at time.Time) *timeSlice {
	i := max(int(at.Sub(tl.start)/tl.every), 0)
	for len(tl.slices) <= i {
		tl.slices = append(tl.slices, timeSlice{})
	}
	return &tl.slices[i]
}

// record counts a request due at at; a nil timeline counts nothing.
func (tl *timeline) record(at time.Time, d time.Duration, failed bool) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	s := tl.slice(at)
	s.lat = append(s.lat, d)
	if failed {
		s.errors++
	}
}

// drop counts a dropped arrival due at at as an error.
func (tl *timeline) drop(at time.Time) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	s := tl.slice(at)
	s.errors++
	s.dropped++
}

// summary is what one endpoint (or all of them) measured.
type summary struct {
	name               string
	requests           int // arrivals, dropped ones included
	p50, p95, p99, max time.Duration
	errors             int
	errs               map[string]int
	samples            map[string]string
}

// summarize computes the figures of the endpoints, and of all of them together as "total".
func summarize(eps []*endpoint) (per []summary, total summary) {
	total = summary{name: "total", errs: map[string]int{}}
	var all []time.Duration
	for _, e := range eps {
		e.mu.Lock()
		s := summary{name: e.name, errs: e.errs, samples: e.samples}
		for _, n := range e.errs {
			s.errors += n
		}
		s.requests = len(e.lat) + e.errs["dropped"]
		s.p50, s.p95, s.p99, s.max = quantiles(e.lat)
		all = append(all, e.lat...)
		e.mu.Unlock()
		per = append(per, s)
		total.requests += s.requests
		total.errors += s.errors
		for k, n := range s.errs {
			total.errs[k] += n
		}
	}
	total.p50, total.p95, total.p99, total.max = quantiles(all)
	return per, total
}

// quantiles returns the p50, p95, p99 and maximum of durations.
func quantiles(d []time.Duration) (p50, p95, p99, maxD time.Duration) {
	if len(d) == 0 {
		return
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[int(float64(len(s)-1)*p)] }
	return at(0.5), at(0.95), at(0.99), s[len(s)-1]
}
