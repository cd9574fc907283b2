// Command load drives studio with a mixed workload at a fixed request rate for a fixed time and prints,
// per endpoint, requests, throughput, p50/p95/p99 latency and errors, the peak resident memory of the
// server, and whether the credits ledger still balances.
//
// By default it starts studio in-process over a fresh database (SQLite, or a new database on the
// PostgreSQL server given with -db) with fake OpenAI-compatible upstreams on loopback whose latency is
// set by flags; with -target it drives a running studio instead, creating a tenant with -admin-key.
//
// The load is open-loop: requests are due at -rate per second, evenly spaced, each to an endpoint drawn
// by the weights of -mix, and latency counts from when a request was due, so that a server that falls
// behind shows it in the figures (no coordinated omission). At most -max-inflight requests run at once;
// due requests beyond that wait in a queue (their wait counts), and beyond -max-queue are dropped and
// counted as errors.
//
// Endpoints of the mix: generate (POST /api/generate), generate-batch (POST /api/generate-batch with
// -batch items), job (GET /api/jobs?id= of a recent job), jobs-list (GET /api/jobs), video (POST
// /api/videos), video-poll (GET /api/videos?id= of a recent task), chat and chat-stream (POST
// /api/chat/completions), upload (POST /api/upload-ref with a small PNG), console and console-jobs (GET
// /console and /console/jobs with a session signed in once through POST /login with the tenant key).
//
// -submit-only reproduces the target of issue 13: 1 000 POST /api/generate per second for 60 s, p99
// under 50 ms and no error (on PostgreSQL).
//
//	go run ./bench/load -db sqlite -duration 30s -rate 200
//	go run ./bench/load -db postgres://postgres@127.0.0.1:5432/test -duration 30s -rate 200
//	go run ./bench/load -db postgres://postgres@127.0.0.1:5432/test -submit-only
//	go run ./bench/load -target http://127.0.0.1:8080 -admin-key "$ADMIN_KEY" -duration 60s -rate 100
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// options are the command-line flags.
type options struct {
	target, adminKey, auditDB string
	db                        string
	duration                  time.Duration
	rate                      float64
	mix                       string
	batch                     int
	inflight, queue           int
	timeout                   time.Duration
	workers                   int
	timing                    fakeTiming
	drain                     time.Duration
	submitOnly                bool
	cpuProfile                string
	timeline                  time.Duration
	warmup                    time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.target, "target", "", "base URL of a running studio to drive (default: start studio in-process)")
	flag.StringVar(&o.adminKey, "admin-key", "", "with -target: the administrator key (creates the tenant, reads /metrics)")
	flag.StringVar(&o.auditDB, "audit-db", "", "with -target: the target's DATABASE_URL, to audit the credits ledger after the run")
	flag.StringVar(&o.db, "db", "sqlite", "in-process: sqlite, or a postgres:// server URL (a fresh database is created on it)")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long requests are sent")
	flag.Float64Var(&o.rate, "rate", 200, "requests per second over the whole mix")
	flag.StringVar(&o.mix, "mix", defaultMix, "endpoint weights, name=weight,...; endpoints not named are not called")
	flag.IntVar(&o.batch, "batch", 4, "items of one generate-batch request")
	flag.IntVar(&o.inflight, "max-inflight", 256, "requests running at once at most")
	flag.IntVar(&o.queue, "max-queue", 10000, "due requests waiting for a slot at most (beyond: dropped, counted as errors)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of one request")
	flag.IntVar(&o.workers, "workers", 100, "in-process: job workers")
	flag.DurationVar(&o.timing.image, "image-latency", 200*time.Millisecond, "in-process: latency of the fake image upstream")
	flag.DurationVar(&o.timing.chat, "chat-latency", 50*time.Millisecond, "in-process: latency of the fake chat upstream")
	flag.DurationVar(&o.timing.video, "video-latency", 50*time.Millisecond, "in-process: latency of each call to the fake video upstream")
	flag.IntVar(&o.timing.videoPolls, "video-polls", 3, "in-process: status requests until a fake video is completed")
	flag.DurationVar(&o.timing.videoPoll, "video-poll", time.Second, "in-process: how often studio checks a running video task")
	flag.DurationVar(&o.drain, "drain", 30*time.Second, "in-process: after the run, how long to wait for unfinished jobs")
	flag.BoolVar(&o.submitOnly, "submit-only", false, "issue 13 target: only POST /api/generate, at 1000/s for 60 s unless -rate, -duration say otherwise")
	flag.BoolVar(&keepData, "keep-data", false, keepDataHelp)
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed run (this whole process) to this file")
	flag.DurationVar(&o.warmup, "warmup", 0, "before the measured run, send the same workload for this long and report it apart (0: none; 5s with -submit-only)")
	flag.DurationVar(&o.timeline, "timeline", 0, "also print p50/p99 and errors per slice of this length, by due time (0: off; 10s with -submit-only)")
	flag.Parse()
	if o.submitOnly {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		o.mix = "generate=1"
		if !set["rate"] {
			o.rate = 1000
		}
		if !set["duration"] {
			o.duration = 60 * time.Second
		}
		if !set["timeline"] {
			o.timeline = 10 * time.Second
		}
		if !set["warmup"] {
			o.warmup = 5 * time.Second
		}
	}
	// Keep the output to the figures: the server's access log and slow-statement warnings go nowhere.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	weights, err := parseMix(o.mix)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	ok, err := run(o, weights)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// run drives the load with the endpoint weights and prints the report; it reports false when the
// ledger does not balance.
func run(o options, weights map[string]float64) (bool, error) {
	ctx := context.Background()
	if o.rate <= 0 || o.duration <= 0 || o.inflight < 1 || o.queue < 0 || o.batch < 1 {
		return false, errors.New("-rate, -duration, -max-inflight and -batch must be positive")
	}
	var (
		srv      *local
		base     = strings.TrimRight(o.target, "/")
		adminKey = o.adminKey
		rss      = selfRSS
		where    = "in-process"
	)
	if o.target == "" {
		var err error
		if srv, err = startLocal(ctx, o.db, o.timing, o.workers); err != nil {
			return false, err
		}
		defer srv.close()
		base, adminKey = srv.base, srv.adminKey
		where = fmt.Sprintf("in-process, db=%s, fake upstreams: image %s, chat %s, video %s x %d polls every %s, %d workers",
			srv.svc.DB.Dialect, o.timing.image, o.timing.chat, o.timing.video, o.timing.videoPolls, o.timing.videoPoll, o.workers)
	} else {
		if adminKey == "" {
			return false, errors.New("-target needs -admin-key")
		}
		rss = metricsRSS(base+"/metrics", adminKey)
		where = "target " + base
	}
	key, err := createTenant(ctx, base, adminKey)
	if err != nil {
		return false, err
	}
	if srv != nil {
		if err := srv.svc.App.Auth().IdentityCacheReady(ctx); err != nil {
			return false, err
		}
	}
	transport := &http.Transport{MaxIdleConns: 2 * o.inflight, MaxIdleConnsPerHost: 2 * o.inflight, IdleConnTimeout: time.Minute}
	c := newClient(base, key, o.batch, transport, o.timeout)
	eps := c.endpoints(weights)
	if err := prepare(ctx, c, eps); err != nil {
		return false, err
	}

	fmt.Printf("studio load: %s; %d cores, GOMAXPROCS %d\n", where, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Printf("open loop: %.0f requests/s for %s, at most %d in flight; mix %s\n\n", o.rate, o.duration, o.inflight, mixLine(eps))
	if o.warmup > 0 {
		// A server that just started opens its database connections, prepares its statements and grows
		// its heap during the first second; the measured run starts once that is done.
		weps := c.endpoints(weights)
		drive(ctx, weps, o.rate, o.warmup, o.inflight, o.queue, nil)
		_, w := summarize(weps)
		fmt.Printf("warm-up (not counted below): %d requests in %s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, errors %s\n\n",
			w.requests, o.warmup, ms(w.p50), ms(w.p99), ms(w.max), errorsLine(w))
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return false, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return false, err
		}
	}
	sampling, stopSampling := context.WithCancel(ctx)
	peak := sampleRSS(sampling, rss, 250*time.Millisecond)
	var tl *timeline
	if o.timeline > 0 {
		tl = &timeline{every: o.timeline}
	}
	drive(ctx, eps, o.rate, o.duration, o.inflight, o.queue, tl)
	pprof.StopCPUProfile()
	stopSampling()
	total := report(eps, o.duration)
	if tl != nil {
		reportTimeline(tl)
	}
	if o.submitOnly {
		verdict := "met"
		if o.rate < 1000 || o.duration < time.Minute || total.p99 >= 50*time.Millisecond || total.errors > 0 {
			verdict = "NOT met"
		}
		fmt.Printf("issue 13 target (1000 submits/s for 60 s, p99 under 50 ms, no error): %s; this run: %.0f submits/s for %s, p99 %.2f ms, %d errors\n",
			verdict, o.rate, o.duration, ms(total.p99), total.errors)
	}
	if rssPeak := <-peak; rssPeak > 0 {
		if srv != nil {
			fmt.Printf("server RSS: peak %.0f MiB (VmRSS of this process, sampled every 250 ms: studio, fake upstreams and load generator)\n", rssPeak/(1<<20))
		} else {
			fmt.Printf("server RSS: peak %.0f MiB (process_resident_memory_bytes of %s/metrics)\n", rssPeak/(1<<20), base)
		}
	} else {
		fmt.Println("server RSS: not available")
	}

	var problems []string
	switch {
	case srv != nil:
		drainStart := time.Now()
		left := srv.drain(ctx, o.drain)
		if left == 0 {
			fmt.Printf("drained: every job ended %.1f s after the run\n", time.Since(drainStart).Seconds())
		} else {
			fmt.Printf("drained: %d jobs or video tasks still unfinished %s after the run (left queued)\n", left, o.drain)
		}
		if err := srv.stop(ctx); err != nil {
			fmt.Println("stop:", err)
		}
		fmt.Printf("image jobs: %s; video tasks: %s\n", srv.statusCounts(ctx, "jobs"), srv.statusCounts(ctx, "video_tasks"))
		if problems, err = srv.svc.App.Credits().AuditLedger(ctx); err != nil {
			return false, err
		}
	case o.auditDB != "":
		if problems, err = auditDB(ctx, o.auditDB); err != nil {
			return false, err
		}
	default:
		fmt.Println("ledger: not checked (pass -audit-db with the target's DATABASE_URL)")
		return true, nil
	}
	if len(problems) > 0 {
		fmt.Println("ledger: NOT balanced")
		for _, p := range problems {
			fmt.Println("  " + p)
		}
		return false, nil
	}
	fmt.Println("ledger: balanced")
	return true, nil
}

// prepare signs the console in when the mix has console pages, and calls every endpoint of the mix
// once (after a submit of the work the polling endpoints read), so that a broken endpoint stops the
// run before it starts, and connections and caches are warm.
func prepare(ctx context.Context, c *client, eps []*endpoint) error {
	names := map[string]bool{}
	for _, e := range eps {
		names[e.name] = true
	}
	if names["console"] || names["console-jobs"] {
		if err := c.signIn(ctx); err != nil {
			return err
		}
	}
	if names["job"] && !names["generate"] {
		if err := c.generate(ctx); err != nil {
			return fmt.Errorf("generate (to have a job to poll): %w", err)
		}
	}
	if names["video-poll"] && !names["video"] {
		if err := c.video(ctx); err != nil {
			return fmt.Errorf("video (to have a task to poll): %w", err)
		}
	}
	for _, e := range eps {
		if err := e.call(ctx); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	return nil
}

// mixLine shows the mix as percentages.
func mixLine(eps []*endpoint) string {
	var total float64
	for _, e := range eps {
		total += e.weight
	}
	parts := make([]string, len(eps))
	for i, e := range eps {
		parts[i] = fmt.Sprintf("%s %.0f%%", e.name, 100*e.weight/total)
	}
	return strings.Join(parts, ", ")
}

// report prints the table of the endpoints and a sample of each kind of error; it returns the total.
func report(eps []*endpoint, window time.Duration) summary {
	per, total := summarize(eps)
	fmt.Printf("%-15s %9s %8s %9s %9s %9s %9s  %s\n", "endpoint", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "errors")
	fmt.Println(strings.Repeat("-", 92))
	line := func(s summary) {
		fmt.Printf("%-15s %9d %8.1f %9.2f %9.2f %9.2f %9.2f  %s\n", s.name, s.requests, float64(s.requests)/window.Seconds(),
			ms(s.p50), ms(s.p95), ms(s.p99), ms(s.max), errorsLine(s))
	}
	for _, s := range per {
		line(s)
	}
	fmt.Println(strings.Repeat("-", 92))
	line(total)
	fmt.Println("(latency from when each request was due to the end of its answer, errors included; a stream counts to its last byte)")
	for _, s := range per {
		labels := sortedKeys(s.samples)
		for _, l := range labels {
			fmt.Printf("  %s %s, e.g.: %s\n", s.name, l, s.samples[l])
		}
	}
	fmt.Println()
	return total
}

// reportTimeline prints the figures of each slice of the run, by the time requests were due.
func reportTimeline(tl *timeline) {
	fmt.Printf("%-13s %9s %9s %9s %9s\n", "due at", "requests", "p50 ms", "p99 ms", "errors")
	for i, s := range tl.slices {
		p50, _, p99, _ := quantiles(s.lat)
		from, to := time.Duration(i)*tl.every, time.Duration(i+1)*tl.every
		fmt.Printf("%-13s %9d %9.2f %9.2f %9d\n", fmt.Sprintf("%s-%s", from, to), len(s.lat)+s.dropped, ms(p50), ms(p99), s.errors)
	}
	fmt.Println()
}

// errorsLine formats an error count with its breakdown ("0", or "12 (429 10, transport 2)").
func errorsLine(s summary) string {
	if s.errors == 0 {
		return "0"
	}
	var parts []string
	for _, l := range sortedKeys(s.errs) {
		parts = append(parts, fmt.Sprintf("%s %d", l, s.errs[l]))
	}
	return fmt.Sprintf("%d (%s)", s.errors, strings.Join(parts, ", "))
}

// sortedKeys returns the keys of a map in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
