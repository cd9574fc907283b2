package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// submit is what the generator saw of one submit.
type submit struct {
	due  time.Time // when it was due (burst: when its client took it)
	sent time.Time
	end  time.Time
	id   string // the job or task id of an accepted submit
	err  string // "" accepted; else the status code, "transport", "bad answer" or "dropped"
}

// latency is from when the submit was due to the end of its answer.
func (s *submit) latency() time.Duration { return s.end.Sub(s.due) }

// submitter sends the run's submits as one tenant: POST /api/generate with the prompt "bench job <i>",
// or POST /api/videos with "bench video <i>" and the clip length.
type submitter struct {
	base, key string
	video     bool
	seconds   int // video clip length
	hc        *http.Client
	subs      []submit
	sample    map[string]string // an answer per kind of error
	mu        sync.Mutex
}

func newSubmitter(base, key string, video bool, seconds, n, clients int, timeout time.Duration) *submitter {
	tr := &http.Transport{MaxIdleConns: clients + 16, MaxIdleConnsPerHost: clients + 16, IdleConnTimeout: 2 * time.Minute,
		DisableCompression: true}
	return &submitter{base: base, key: key, video: video, seconds: seconds, subs: make([]submit, n), sample: map[string]string{},
		hc: &http.Client{Transport: tr, Timeout: timeout}}
}

// send makes submit i; its due time is already set.
func (s *submitter) send(ctx context.Context, i int) {
	sub := &s.subs[i]
	body := make([]byte, 0, 64)
	path, idKey := "/api/generate", "jobId"
	if s.video {
		path, idKey = "/api/videos", "id"
		body = append(body, `{"prompt":"bench video `...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, `","duration":`...)
		body = strconv.AppendInt(body, int64(s.seconds), 10)
		body = append(body, '}')
	} else {
		body = append(body, `{"prompt":"bench job `...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, `"}`...)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", s.base+path, bytes.NewReader(body))
	req.Header["X-Api-Key"] = []string{s.key}
	req.Header["Content-Type"] = []string{"application/json"}
	sub.sent = time.Now()
	res, err := s.hc.Do(req)
	if err != nil {
		sub.end, sub.err = time.Now(), "transport"
		s.note("transport", []byte(err.Error()))
		return
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	sub.end = time.Now()
	switch {
	case err != nil:
		sub.err = "transport"
		s.note(sub.err, []byte(err.Error()))
	case res.StatusCode != http.StatusOK:
		sub.err = strconv.Itoa(res.StatusCode)
		s.note(sub.err, b)
	default:
		if sub.id = gjson.GetBytes(b, idKey).String(); sub.id == "" {
			sub.err = "bad answer"
			s.note(sub.err, b)
		}
	}
}

// note keeps the first answer of each kind of error.
func (s *submitter) note(kind string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sample[kind]; !ok {
		s.sample[kind] = snippet(b)
	}
}

// burst sends every submit as fast as clients concurrent clients can, each taking the next index.
// Each submit is due when its client takes it.
func (s *submitter) burst(ctx context.Context, clients int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(s.subs) {
					return
				}
				s.subs[i].due = time.Now()
				s.send(ctx, i)
			}
		})
	}
	wg.Wait()
}

// open sends the submits open-loop: submit i is due at start + i/rate. At most clients run at once;
// a due submit that finds every client busy waits in a queue of at most maxQueue (its wait counts in
// its latency, which runs from when it was due), and beyond that is dropped and counted as an error,
// so that a server falling behind shows in the figures instead of slowing the generator down.
func (s *submitter) open(ctx context.Context, rate float64, clients, maxQueue int) time.Time {
	due := make(chan int, maxQueue)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range due {
				s.send(ctx, i)
			}
		})
	}
	start := time.Now()
	interval := float64(time.Second) / rate
	for i := range s.subs {
		at := start.Add(time.Duration(float64(i) * interval))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		s.subs[i].due = at
		select {
		case due <- i:
		default:
			s.subs[i].end, s.subs[i].err = at, "dropped"
		}
	}
	close(due)
	wg.Wait()
	return start
}

// first returns when the first submit was sent.
func (s *submitter) first() time.Time {
	var t time.Time
	for i := range s.subs {
		if st := s.subs[i].sent; !st.IsZero() && (t.IsZero() || st.Before(t)) {
			t = st
		}
	}
	return t
}

// errNotReady is returned when a warm-up call does not answer 200.
var errNotReady = errors.New("not ready")

// warm makes one read with the tenant key, so that its identity is cached before the timed submits.
func (s *submitter) warm(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/api/jobs?limit=1", nil)
	req.Header.Set("X-API-Key", s.key)
	res, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return errors.Join(errNotReady, errors.New(strconv.Itoa(res.StatusCode)+": "+snippet(b)))
	}
	return nil
}
