package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"studio/jobs/upstream/fakeupstream"
)

// fake is an OpenAI-compatible upstream in this process, served over TLS with HTTP/2, so that tens of
// thousands of calls in flight share a few connections (HTTP/1.1 would need a connection, and two file
// descriptors in this machine's budget, per call). It answers what studio's openai adapter sends:
// POST /v1/images/generations after the image latency (the pictures of jobs/upstream/fakeupstream),
// and video tasks that are completed once the video duration has passed since their creation
// (POST /v1/videos, GET /v1/videos/{id}, GET /v1/videos/{id}/content), plus GET /v1/models for probes.
//
// It records what the figures need: image calls in flight (now and at most), the time each job's
// answer was sent (by the index in its prompt, "bench job 123"), and each video task's creation.
type fake struct {
	srv      *httptest.Server
	certFile string
	latency  time.Duration // of an image call
	videoFor time.Duration // from a video task's creation to its completion

	answers [256][]byte // image answers, one per picture variant

	calls       atomic.Int64 // every call
	h2          atomic.Int64 // calls that came over HTTP/2
	allInflight atomic.Int64 // calls of any kind in flight now
	allPeak     atomic.Int64 // calls of any kind in flight at most
	imgCalls    atomic.Int64
	inflight    atomic.Int64 // image calls in flight now
	peak        atomic.Int64 // image calls in flight at most
	cut         atomic.Int64 // image calls whose caller left before the answer
	unmatched   atomic.Int64 // image calls whose prompt named no job of the run
	answered    []atomic.Int64
	arrived     []atomic.Int64 // when a job's first call arrived (unix ns)
	perJob      []atomic.Int32 // image calls per job

	vidCalls  atomic.Int64
	vidPolls  atomic.Int64
	conns     atomic.Int64 // connections open now
	peakConns atomic.Int64
	mu        sync.Mutex
	videos    map[string]*videoTask
	nextVideo int
}

// videoTask is one video task of the fake.
type videoTask struct {
	created time.Time
	index   int
	seen    time.Time // first status answer that said completed
}

// newFake starts the fake for a run of n jobs and writes its certificate (PEM) into dir.
func newFake(dir string, n int, latency, videoFor time.Duration) (*fake, error) {
	f := &fake{latency: latency, videoFor: videoFor, videos: map[string]*videoTask{},
		answered: make([]atomic.Int64, n), arrived: make([]atomic.Int64, n), perJob: make([]atomic.Int32, n)}
	created := time.Now().Unix()
	for i := range f.answers {
		png := fakeupstream.PNG(strconv.Itoa(i))
		f.answers[i], _ = json.Marshal(map[string]any{"created": created,
			"data": []any{map[string]any{"b64_json": base64.StdEncoding.EncodeToString(png)}}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/images/generations", f.image)
	mux.HandleFunc("POST /v1/videos", f.createVideo)
	mux.HandleFunc("GET /v1/videos/{id}", f.getVideo)
	mux.HandleFunc("GET /v1/videos/{id}/content", f.videoContent)
	mux.HandleFunc("DELETE /v1/videos/{id}", f.deleteVideo)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, []byte(`{"object":"list","data":[{"id":"fake-image","object":"model"}]}`))
	})
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		if r.ProtoMajor == 2 {
			f.h2.Add(1)
		}
		setMax(&f.allPeak, f.allInflight.Add(1))
		defer f.allInflight.Add(-1)
		mux.ServeHTTP(w, r)
	}))
	f.srv.EnableHTTP2 = true
	// Go's HTTP/2 server allows 250 streams per connection by default; the client opens another
	// connection beyond that. 1 000 keeps 30 000 calls in flight on about 30 connections.
	f.srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			setMax(&f.peakConns, f.conns.Add(1))
		case http.StateClosed, http.StateHijacked:
			f.conns.Add(-1)
		}
	}
	f.srv.StartTLS()
	cert := f.srv.Certificate()
	f.certFile = dir + "/fake-upstream.pem"
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	if err := os.WriteFile(f.certFile, pemBytes, 0o600); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// baseURL is the API's base URL as the upstreams file names it (https://127.0.0.1:port/v1).
func (f *fake) baseURL() string { return f.srv.URL + "/v1" }

// check makes one call over HTTP/2 with the certificate file as the only root, as studio will.
func (f *fake) check(ctx context.Context) error {
	pool, err := certPool(f.certFile)
	if err != nil {
		return err
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.baseURL()+"/models", nil)
	res, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("fake upstream over TLS: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.ProtoMajor != 2 {
		return fmt.Errorf("fake upstream answered over %s, not HTTP/2", res.Proto)
	}
	return nil
}

func (f *fake) close() {
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// setMax raises m to v when v is larger.
func setMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// promptIndex returns the job index a prompt carries ("bench job 123", "bench video 123"), or -1.
func promptIndex(prompt string) int {
	for _, marker := range []string{"bench job ", "bench video "} {
		if at := strings.Index(prompt, marker); at >= 0 {
			rest := prompt[at+len(marker):]
			end := 0
			for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
				end++
			}
			if n, err := strconv.Atoi(rest[:end]); err == nil {
				return n
			}
		}
	}
	return -1
}

func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// image serves POST /v1/images/generations: it waits the latency, answers one picture, and records
// when the answer was sent for the job the prompt names.
func (f *fake) image(w http.ResponseWriter, r *http.Request) {
	f.imgCalls.Add(1)
	setMax(&f.peak, f.inflight.Add(1))
	defer f.inflight.Add(-1)
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	i := promptIndex(gjson.GetBytes(body, "prompt").String())
	if i < 0 || i >= len(f.answered) {
		f.unmatched.Add(1)
		i = -1
	} else {
		f.perJob[i].Add(1)
		f.arrived[i].CompareAndSwap(0, time.Now().UnixNano())
	}
	if f.latency > 0 {
		t := time.NewTimer(f.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			f.cut.Add(1)
			return
		}
	}
	if i >= 0 {
		f.answered[i].Store(time.Now().UnixNano())
	}
	writeJSON(w, f.answers[max(i, 0)&255])
}

// videoObject is the Videos API shape of a task at now.
func (f *fake) videoObject(id string, v *videoTask, now time.Time) []byte {
	status, progress := "in_progress", 0
	if elapsed := now.Sub(v.created); elapsed >= f.videoFor {
		status, progress = "completed", 100
	} else if f.videoFor > 0 {
		progress = int(100 * elapsed / f.videoFor)
	}
	return []byte(`{"id":"` + id + `","object":"video","status":"` + status + `","progress":` + strconv.Itoa(progress) + `,"model":"fake-video"}`)
}

// createVideo serves POST /v1/videos.
func (f *fake) createVideo(w http.ResponseWriter, r *http.Request) {
	f.vidCalls.Add(1)
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	i := promptIndex(gjson.GetBytes(body, "prompt").String())
	now := time.Now()
	f.mu.Lock()
	f.nextVideo++
	id := "video_" + strconv.Itoa(f.nextVideo)
	v := &videoTask{created: now, index: i}
	f.videos[id] = v
	obj := f.videoObject(id, v, now)
	f.mu.Unlock()
	writeJSON(w, obj)
}

// getVideo serves GET /v1/videos/{id}.
func (f *fake) getVideo(w http.ResponseWriter, r *http.Request) {
	f.vidCalls.Add(1)
	f.vidPolls.Add(1)
	id := r.PathValue("id")
	now := time.Now()
	f.mu.Lock()
	v, ok := f.videos[id]
	var obj []byte
	if ok {
		obj = f.videoObject(id, v, now)
		if v.seen.IsZero() && now.Sub(v.created) >= f.videoFor {
			v.seen = now
		}
	}
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		writeJSON(w, []byte(`{"error":{"message":"video not found","type":"invalid_request_error","code":"not_found"}}`))
		return
	}
	writeJSON(w, obj)
}

// videoContent serves GET /v1/videos/{id}/content: the tiny MP4 of fakeupstream once completed.
func (f *fake) videoContent(w http.ResponseWriter, r *http.Request) {
	f.vidCalls.Add(1)
	f.mu.Lock()
	v, ok := f.videos[r.PathValue("id")]
	done := ok && time.Since(v.created) >= f.videoFor
	f.mu.Unlock()
	if !done {
		w.WriteHeader(http.StatusNotFound)
		writeJSON(w, []byte(`{"error":{"message":"video not found","type":"invalid_request_error","code":"not_found"}}`))
		return
	}
	w.Header().Set("Content-Type", "video/mp4")
	_, _ = w.Write(fakeupstream.MP4)
}

// deleteVideo serves DELETE /v1/videos/{id}.
func (f *fake) deleteVideo(w http.ResponseWriter, r *http.Request) {
	f.vidCalls.Add(1)
	id := r.PathValue("id")
	f.mu.Lock()
	delete(f.videos, id)
	f.mu.Unlock()
	writeJSON(w, []byte(`{"id":"`+id+`","object":"video.deleted","deleted":true}`))
}

// videoEnd returns when a task of the fake ended (its creation plus the video duration) and when a
// status answer first said so.
func (f *fake) videoEnd(id string) (end, seen time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.videos[id]
	if !ok {
		return time.Time{}, time.Time{}, false
	}
	return v.created.Add(f.videoFor), v.seen, true
}

// certPool returns a pool holding the certificates of a PEM file.
func certPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no certificate", file)
	}
	return pool, nil
}

// videosCreated is how many video tasks the fake has started.
func (f *fake) videosCreated() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.videos)
}
