// Command inflight measures how many generations one studio replica keeps in flight. studio runs as
// `studio serve` in a process of its own (built from ./cmd/studio), over a fresh database, with an
// upstreams file that points at fake OpenAI-compatible upstreams served by this program over TLS with
// HTTP/2 (so that tens of thousands of calls in flight share a few connections). Four scenarios, each
// judged against its targets (a verdict line per target):
//
//   - burst: -jobs (10 000) image jobs of a -latency (30 s) upstream submitted at once by -clients (256)
//     clients (POST /api/generate): all done within -within (40 s) of the first submit.
//   - open: -rate (1 000) submits per second for -duration (30 s), open loop (latency from when each
//     submit was due), to a -latency (60 s) upstream: every job done within -after-answer (3 s) of its
//     upstream's answer; submit p99 under -submit-p99 (100 ms) in every -slice (5 s) and no error;
//     studio's resident memory under -max-rss-mb (1 536); database connections within
//     -db-max-conns (SERVICE_DB_MAX_CONNS, 30).
//   - video: -jobs (10 000) video tasks (POST /api/videos, -video-seconds 5, the default tier) to an
//     asynchronous provider whose tasks end -video-duration (2 min) after creation: all done, with at
//     most -max-busy (16) busy queue workers (studio_queue_running); how long after each task's end
//     studio marked it done.
//   - limit: -jobs (400) image jobs of a -latency (1 s) upstream declared with max_concurrency
//     -max-concurrency (20), submitted at once: never more calls in flight at the fake, every job done.
//
// -scenario all runs them in turn, -runs N repeats each; a markdown table of the runs ends the output.
//
//	go run ./bench/inflight -scenario burst -jobs 300 -latency 2s
//	go run ./bench/inflight -db postgres://postgres@127.0.0.1:5432/test -scenario all
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"studio/bench/internal/benchdb"
	"studio/models"
)

// options are the command-line flags.
type options struct {
	scenario      string
	runs          int
	db            string
	clients       int
	jobs          int
	latency       time.Duration
	rate          float64
	duration      time.Duration
	videoDuration time.Duration
	videoSeconds  int
	maxConc       int
	within        time.Duration
	afterAnswer   time.Duration
	submitP99     time.Duration
	slice         time.Duration
	maxRSSMB      float64
	maxBusy       int
	dbMaxConns    int
	workers       int
	wait          time.Duration
	sample        time.Duration
	maxQueue      int
	timeout       time.Duration
	studioBin     string
	keepData      bool
}

// scenario is one scenario with its figures resolved from the flags.
type scenario struct {
	name           string
	video          bool
	open           bool          // open loop at rate for duration; otherwise every submit at once
	jobs           int           // submits
	latency        time.Duration // the upstream's: an image call's answer, a video task's run
	rate           float64
	duration       time.Duration
	maxConcurrency int // written to the upstreams file when > 0
}

// scenarios lists the scenarios in the order of -scenario all.
var scenarios = []string{"burst", "open", "video", "limit"}

// resolve returns a scenario's figures: the flags that were set, else the scenario's defaults.
func resolve(name string, o options) scenario {
	pick := func(set, def time.Duration) time.Duration {
		if set > 0 {
			return set
		}
		return def
	}
	jobs := func(def int) int {
		if o.jobs > 0 {
			return o.jobs
		}
		return def
	}
	switch name {
	case "burst":
		return scenario{name: name, jobs: jobs(10000), latency: pick(o.latency, 30*time.Second)}
	case "open":
		rate := o.rate
		if rate <= 0 {
			rate = 1000
		}
		d := pick(o.duration, 30*time.Second)
		return scenario{name: name, open: true, rate: rate, duration: d, jobs: int(rate * d.Seconds()), latency: pick(o.latency, time.Minute)}
	case "video":
		return scenario{name: name, video: true, jobs: jobs(10000), latency: o.videoDuration}
	default: // limit
		return scenario{name: "limit", jobs: jobs(400), latency: pick(o.latency, time.Second), maxConcurrency: o.maxConc}
	}
}

func main() {
	var o options
	flag.StringVar(&o.scenario, "scenario", "all", "burst, open, video, limit, or all (each in turn)")
	flag.IntVar(&o.runs, "runs", 1, "runs of each scenario")
	flag.StringVar(&o.db, "db", "sqlite", "sqlite, or a postgres:// server URL (a fresh database is created on it for each run)")
	flag.IntVar(&o.clients, "clients", 256, "concurrent submitting clients (open loop: submits in flight at most)")
	flag.IntVar(&o.jobs, "jobs", 0, "submits of burst, video and limit (0: 10 000, 10 000, 400)")
	flag.DurationVar(&o.latency, "latency", 0, "the image upstream's latency in burst, open and limit (0: 30s, 60s, 1s)")
	flag.Float64Var(&o.rate, "rate", 1000, "open: submits per second")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "open: how long submits are due")
	flag.DurationVar(&o.videoDuration, "video-duration", 2*time.Minute, "video: how long a task runs at the provider")
	flag.IntVar(&o.videoSeconds, "video-seconds", 5, "video: the clip length asked for (duration of POST /api/videos)")
	flag.IntVar(&o.maxConc, "max-concurrency", 20, "limit: max_concurrency of the image upstream in the upstreams file, and the bound judged (0: the field is not written)")
	flag.DurationVar(&o.within, "within", 40*time.Second, "burst target: every job done within this time of the first submit")
	flag.DurationVar(&o.afterAnswer, "after-answer", 3*time.Second, "open target: every job done within this time of its upstream's answer")
	flag.DurationVar(&o.submitP99, "submit-p99", 100*time.Millisecond, "open target: submit p99 under this in every slice")
	flag.DurationVar(&o.slice, "slice", 5*time.Second, "open: the slices of the submit p99 figures, by due time")
	flag.Float64Var(&o.maxRSSMB, "max-rss-mb", 1536, "open target: studio's peak resident memory under this many MiB")
	flag.IntVar(&o.maxBusy, "max-busy", 16, "video target: busy queue workers (studio_queue_running) at most")
	flag.IntVar(&o.dbMaxConns, "db-max-conns", 30, "SERVICE_DB_MAX_CONNS of studio, and the open target's connection budget")
	flag.IntVar(&o.workers, "workers", 0, "SERVICE_WORKERS of studio (0: not set, studio's default)")
	flag.DurationVar(&o.wait, "wait", 0, "after the last submit, how long to wait for the jobs to end (0: the upstream latency + 2 min)")
	flag.DurationVar(&o.sample, "sample", 250*time.Millisecond, "how often studio's /metrics, /proc and pg_stat_activity are read")
	flag.IntVar(&o.maxQueue, "max-queue", 100000, "open: due submits waiting for a client at most (beyond: dropped, counted as errors)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of one submit")
	flag.StringVar(&o.studioBin, "studio", "", "a studio binary to run (default: go build ./cmd/studio into a temporary directory)")
	flag.BoolVar(&o.keepData, "keep-data", false, "keep each run's directory (studio's log, data, upstreams file, SQLite file) and print its path")
	flag.Parse()

	names := []string{o.scenario}
	if o.scenario == "all" {
		names = scenarios
	}
	for _, n := range names {
		if !contains(scenarios, n) {
			fmt.Fprintf(os.Stderr, "inflight: -scenario %q: want %s or all\n", n, strings.Join(scenarios, ", "))
			os.Exit(2)
		}
	}
	if o.runs < 1 || o.clients < 1 || o.rate <= 0 || o.duration <= 0 || o.videoSeconds < 1 || o.sample <= 0 || o.slice <= 0 {
		fmt.Fprintln(os.Stderr, "inflight: -runs, -clients, -rate, -duration, -video-seconds, -sample and -slice must be positive")
		os.Exit(2)
	}
	if err := run(o, names); err != nil {
		fmt.Fprintln(os.Stderr, "inflight:", err)
		os.Exit(1)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func run(o options, names []string) error {
	ctx := context.Background()
	bin := o.studioBin
	if bin == "" {
		dir, err := os.MkdirTemp("", "studio-inflight-build-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		fmt.Println("building ./cmd/studio ...")
		if bin, err = buildStudio(dir); err != nil {
			return err
		}
	}
	workers := "studio's default"
	if o.workers > 0 {
		workers = strconv.Itoa(o.workers)
	}
	fmt.Printf("studio in flight: db=%s, %d CPUs, GOMAXPROCS %d; studio as a process of its own, SERVICE_WORKERS %s, SERVICE_DB_MAX_CONNS %d; "+
		"fake upstreams in this process over TLS + HTTP/2; metrics sampled every %s\n\n",
		dialect(o.db), runtime.NumCPU(), runtime.GOMAXPROCS(0), workers, o.dbMaxConns, o.sample)
	var results []*result
	for _, name := range names {
		sc := resolve(name, o)
		for r := 1; r <= o.runs; r++ {
			res, err := runOnce(ctx, o, sc, bin, r)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", sc.name, r, err)
			}
			results = append(results, res)
		}
	}
	printTable(results)
	return nil
}

func dialect(db string) string {
	if db == "sqlite" {
		return "sqlite"
	}
	return "postgres"
}

// runOnce runs one scenario once over a fresh database, fakes and studio process, and prints its figures.
func runOnce(ctx context.Context, o options, sc scenario, bin string, runNo int) (*result, error) {
	dir, err := os.MkdirTemp("", "studio-inflight-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if o.keepData {
			fmt.Println("run directory kept:", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	dbURL, dropDB, err := benchdb.Fresh(o.db, dir, "studio_inflight_bench")
	if err != nil {
		return nil, err
	}
	defer dropDB()

	res := &result{sc: sc, db: dialect(o.db), run: runNo, o: o}
	printHeader(res)
	f, err := newFake(dir, sc.jobs, sc.latency, sc.latency)
	if err != nil {
		return nil, err
	}
	defer f.close()
	if err := f.check(ctx); err != nil {
		return nil, err
	}
	f.calls.Store(0)
	f.h2.Store(0)

	upstreams := dir + "/upstreams.yaml"
	if err := upstreamsFile(upstreams, f.baseURL(), sc); err != nil {
		return nil, err
	}
	env := map[string]string{
		"DATABASE_URL":           dbURL,
		"SERVICE_DATA_DIR":       dir + "/data",
		"SERVICE_ADMIN_KEY":      models.NewAPIKey(),
		"SERVICE_UPSTREAMS":      upstreams,
		"SERVICE_GENERATE_RATE":  "1000000000",
		"SERVICE_UPLOAD_RATE":    "1000000000",
		"SERVICE_DB_MAX_CONNS":   strconv.Itoa(o.dbMaxConns),
		"SERVICE_DRAIN_WINDOW":   "0s",
		"SERVICE_SHUTDOWN_GRACE": "2s",
		"SSL_CERT_FILE":          f.certFile,
	}
	if o.workers > 0 {
		env["SERVICE_WORKERS"] = strconv.Itoa(o.workers)
	}
	p, err := startStudio(ctx, bin, dir, env)
	if err != nil {
		res.refused = err.Error()
		fmt.Println("studio did not start:", res.refused)
		res.judge()
		res.printVerdicts()
		fmt.Println()
		return res, nil
	}
	defer p.stop()
	key, err := createTenant(ctx, p.base, p.adminKey)
	if err != nil {
		return nil, err
	}
	sub := newSubmitter(p.base, key, sc.video, o.videoSeconds, sc.jobs, o.clients, o.timeout)
	if err := sub.warm(ctx); err != nil {
		return nil, err
	}
	rdb, err := openRunDB(dbURL)
	if err != nil {
		return nil, err
	}
	defer rdb.db.Close()
	smp := newSampler(p, rdb, o.sample)
	smp.start(ctx)

	// Submit, then wait for every job to end (or the wait to pass), reading the database every 250 ms.
	t0 := time.Now()
	if sc.open {
		sub.open(ctx, sc.rate, o.clients, o.maxQueue)
	} else {
		sub.burst(ctx, o.clients)
	}
	submitted := time.Now()
	accepted := 0
	for i := range sub.subs {
		if sub.subs[i].err == "" {
			accepted++
		}
	}
	fmt.Printf("submits: %d in %.1f s, %d accepted; waiting for the jobs to end\n", sc.jobs, submitted.Sub(t0).Seconds(), accepted)
	wait := o.wait
	if wait <= 0 {
		wait = sc.latency + 2*time.Minute
	}
	deadline := submitted.Add(wait)
	lastNote := time.Now()
	left := -1
	for {
		if sc.video && !smp.following.Load() && f.videosCreated() >= accepted {
			smp.following.Store(true)
			fmt.Printf("  %5.0f s after the first submit: every video task started at the provider\n", time.Since(t0).Seconds())
		}
		n, err := rdb.open(ctx, sc.video)
		if err == nil {
			left = n
			if n == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		if time.Since(lastNote) >= 10*time.Second {
			lastNote = time.Now()
			inflight := f.inflight.Load()
			if sc.video {
				inflight = f.allInflight.Load()
			}
			fmt.Printf("  %5.0f s after the first submit: %d not ended; fake: %d calls in flight, %d calls\n",
				time.Since(t0).Seconds(), left, inflight, f.calls.Load())
		}
		time.Sleep(250 * time.Millisecond)
	}
	select {
	case <-p.exited:
		fmt.Printf("studio exited during the run (%v): %s\n", p.waitErr, p.logTail(1))
	default:
	}
	res.peaks = smp.finish()
	rows, err := rdb.rows(ctx, sc.video)
	if err != nil {
		return nil, err
	}
	if n := p.grepLog("level=ERROR", 3); len(n) > 0 {
		res.logErrors = n
	}
	p.stop()
	res.ledger = auditLedger(ctx, dbURL)
	res.compute(sub, f, rows)
	res.judge()
	res.print(sub, f)
	return res, nil
}
