// Command submit measures image job submission: it starts studio in-process over a fresh database with a
// fast fake OpenAI-compatible upstream on loopback, drives POST /api/generate for a fixed time, and prints
// accepted submits per second, p50/p99 submit latency and completed jobs per second. Closed loop by
// default (-clients submit back to back: the most the service takes); with -rate, open loop (submits due
// at that rate, latency from when each was due), which is how the target of issue 6 is checked:
//
//	go run ./bench/submit -db sqlite -duration 20s -clients 32
//	go run ./bench/submit -db postgres://postgres@127.0.0.1:5432/test -duration 20s -clients 32
//	go run ./bench/submit -db postgres://postgres@127.0.0.1:5432/test -rate 1000 -clients 256 -warmup 5s -duration 20s -workers 16 -poll 25ms
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"studio/cmd/server"
	"studio/jobs"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
)

func main() {
	dbFlag := flag.String("db", "sqlite", "sqlite, or a postgres:// server URL (a fresh database is created on it)")
	duration := flag.Duration("duration", 20*time.Second, "how long to submit")
	clients := flag.Int("clients", 32, "concurrent clients (with -rate: requests in flight at most)")
	rate := flag.Float64("rate", 0, "open loop: submits due per second, evenly spaced, latency counted from when each was due "+
		"(0: closed loop, each client submits back to back)")
	warmup := flag.Duration("warmup", 0, "before the measured run, submit the same way for this long and report it apart")
	latency := flag.Duration("upstream-latency", 5*time.Millisecond, "latency of the fake image upstream")
	workers := flag.Int("workers", 100, "job workers")
	poll := flag.Duration("poll", 0, "how often idle workers look for work, and the shortest time between two fetches (0: the service's default)")
	keep := flag.Bool("keep-data", false, "keep the data directory (media, SQLite file) instead of deleting it: on ext4 without a journal, "+
		"thousands of files deleted slow file creation for the next few minutes, and with it the next run")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer f.Close()
		profileFile = f
	}
	o := options{duration: *duration, clients: *clients, rate: *rate, warmup: *warmup, latency: *latency, workers: *workers, poll: *poll, keep: *keep}
	if err := run(*dbFlag, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// profileFile receives the CPU profile of the measured submits (-cpuprofile).
var profileFile *os.File

type options struct {
	duration, warmup time.Duration
	clients          int
	rate             float64
	latency          time.Duration
	workers          int
	poll             time.Duration
	keep             bool
}

func run(dbFlag string, o options) error {
	duration, clients, latency, workers, keep := o.duration, o.clients, o.latency, o.workers, o.keep
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "studio-bench-")
	if err != nil {
		return err
	}
	defer func() {
		if keep {
			fmt.Fprintln(os.Stderr, "data kept in", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	dbURL := "sqlite://" + filepath.Join(dir, "studio.db")
	if dbFlag != "sqlite" {
		name := fmt.Sprintf("studio_bench_%d", time.Now().UnixNano())
		admin, err := sql.Open("pgx", models.PoolURL(dbFlag)) // the admin connection takes no pool settings
		if err != nil {
			return err
		}
		if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
			return err
		}
		defer func() {
			_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			admin.Close()
		}()
		u, _ := url.Parse(dbFlag)
		u.Path = "/" + name
		dbURL = u.String()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	adminKey := models.NewAPIKey()
	vars := map[string]string{"SERVICE_ADDR": ln.Addr().String(), "DATABASE_URL": dbURL, "SERVICE_DATA_DIR": dir,
		"SERVICE_ADMIN_KEY": adminKey, "SERVICE_GENERATE_RATE": "100000000"}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { s, ok := vars[v.Env]; return s, ok })
	if err != nil {
		return err
	}
	fake := fakeupstream.New()
	defer fake.Close()
	if latency > 0 {
		fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: latency})
	}
	ups := []upstream.Config{
		{Name: "img-fast", Provider: "fake", Media: upstream.MediaImage, Family: "gen2", Protocol: upstream.ProtocolOpenAI,
			BaseURL: fake.URL, APIKey: "bench", Model: "img", SoftTimeout: time.Minute, CostUSD: 0.01, Rating: 0.5},
		{Name: "chat", Provider: "local", Media: upstream.MediaChat, Family: "chat", Protocol: upstream.ProtocolBuiltin,
			Model: "chat", SoftTimeout: time.Minute, Rating: 0.5, Capabilities: []upstream.Capability{upstream.CapVision}},
	}
	svc, err := server.Open(ctx, cfg, server.Options{Upstreams: ups, Jobs: jobs.Options{MaxWorkers: workers, PollInterval: o.poll}})
	if err != nil {
		return err
	}
	defer svc.Close()
	srv := &http.Server{Handler: svc.Handler(server.Options{})}
	go srv.Serve(ln)
	if err := svc.Start(ctx); err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}}
	post := func(path, key string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(b))
		req.Header.Set("X-API-Key", key)
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, out, nil
	}
	_, out, err := post("/api/admin", adminKey, map[string]any{"action": "tenant-create", "name": "Bench", "credits": 100000000})
	if err != nil {
		return err
	}
	var created struct {
		APIKey string `json:"api_key"`
	}
	_ = json.Unmarshal(out, &created)

	mode := fmt.Sprintf("closed loop, clients=%d", clients)
	if o.rate > 0 {
		mode = fmt.Sprintf("open loop, %.0f submits/s due, at most %d in flight", o.rate, clients)
	}
	fmt.Printf("studio submit benchmark: db=%s %s duration=%s upstream latency=%s workers=%d\n",
		svc.DB.Dialect, mode, duration, latency, workers)
	submit := func(i int) bool {
		status, _, err := post("/api/generate", created.APIKey, map[string]any{"prompt": fmt.Sprintf("bench %d", i)})
		return err == nil && status == 200
	}
	start := time.Now() // completed jobs count from the first submit, warm-up included
	var submitted int64
	if o.warmup > 0 {
		w := phase(o, o.warmup, submit, 0)
		submitted += w.accepted
		fmt.Printf("warm-up (not counted below): %d submits in %s, p50 %.1f ms, p99 %.1f ms, errors %d\n",
			w.accepted, o.warmup, ms(w.pct(0.5)), ms(w.pct(0.99)), w.failed)
	}
	if f := profileFile; f != nil {
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	r := phase(o, duration, submit, 1<<30)
	pprof.StopCPUProfile() // the profile covers the measured submits only
	submitted += r.accepted
	pct := r.pct
	accepted := r.accepted
	// Completed jobs: wait for the queue to drain, then rate = jobs ended / time since the first submit.
	var ended int64
	for {
		svc.DB.Gorm.Model(&models.Job{}).Where("status <> ?", models.JobPending).Count(&ended)
		if ended >= submitted || time.Since(start) > (o.warmup+duration)*4 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Since(start)
	var doneN int64
	svc.DB.Gorm.Model(&models.Job{}).Where("status = ?", models.JobDone).Count(&doneN)
	fmt.Printf("accepted submits: %d (%.0f/s), errors: %d\n", accepted, float64(accepted)/r.elapsed.Seconds(), r.failed)
	fmt.Printf("submit latency: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", ms(pct(0.5)), ms(pct(0.99)), ms(pct(1)))
	completed := float64(ended) / drained.Seconds()
	fmt.Printf("completed jobs: %d done of %d in %.1f s (%.0f/s)\n", doneN, ended, drained.Seconds(), completed)
	submitRate := float64(accepted) / r.elapsed.Seconds()
	verdict := "met"
	if submitRate < 1000*0.99 || pct(0.99) >= 50*time.Millisecond || completed < submitRate/2 || r.failed > 0 {
		verdict = "NOT met"
	}
	fmt.Printf("issue 6 target (1000 submits/s, p99 under 50 ms, completed jobs/s at least half the submit rate): %s\n", verdict)
	shutdown, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	return svc.Stop(shutdown)
}

// result is what one phase of submits measured.
type result struct {
	accepted, failed int64
	elapsed          time.Duration
	lat              []time.Duration // sorted
}

func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[int(float64(len(r.lat)-1)*p)]
}

// phase submits for d: closed loop (each client back to back) or, with a rate, open loop (submits due
// evenly spaced, each taken by a free client, latency from when it was due so that a server falling
// behind shows it; beyond a queue of 10 000 due submits, they are dropped and counted as errors).
// first numbers the prompts.
func phase(o options, d time.Duration, submit func(i int) bool, first int) result {
	var accepted, failed atomic.Int64
	lat := make([][]time.Duration, o.clients)
	start := time.Now()
	stop := start.Add(d)
	var n atomic.Int64
	// call submits once for client c; its latency counts from since (when it was due, in the open loop).
	call := func(c int, since time.Time) {
		ok := submit(first + int(n.Add(1)))
		lat[c] = append(lat[c], time.Since(since))
		if ok {
			accepted.Add(1)
		} else {
			failed.Add(1)
		}
	}
	var wg sync.WaitGroup
	if o.rate <= 0 {
		for c := range o.clients {
			wg.Go(func() {
				for time.Now().Before(stop) {
					call(c, time.Now())
				}
			})
		}
	} else {
		due := make(chan time.Time, 10000)
		for c := range o.clients {
			wg.Go(func() {
				for at := range due {
					call(c, at)
				}
			})
		}
		interval := float64(time.Second) / o.rate
		for i := 0; ; i++ {
			at := start.Add(time.Duration(float64(i) * interval))
			if !at.Before(stop) {
				break
			}
			time.Sleep(time.Until(at))
			select {
			case due <- at:
			default:
				failed.Add(1)
			}
		}
		close(due)
	}
	wg.Wait()
	r := result{accepted: accepted.Load(), failed: failed.Load(), elapsed: time.Since(start)}
	if o.rate > 0 {
		r.elapsed = d // the offered window; the last answers may end a little after it
	}
	for _, l := range lat {
		r.lat = append(r.lat, l...)
	}
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
