// Command chat measures the chat relay POST /api/chat/completions as its users feel it, against a plain
// reverse proxy. It starts the fake OpenAI-compatible upstream in this process, and two servers in
// processes of their own (this program re-executed), so that each has its own memory and garbage
// collector: studio (cmd/server, the wiring and HTTP settings of `studio serve`) over a fresh database
// with one chat channel on the fake upstream, and a plain httputil.ReverseProxy in front of the same
// upstream. Then, for each case (JSON and SSE answers, each upstream delay), it drives the three targets
// — straight to the upstream, through the plain proxy, through studio — with -clients concurrent
// clients for -duration each, in turns, -count times, and prints throughput, p50 and p99 of each target
// and studio's gap to the plain proxy. After the run it prints the servers' resident memory, checks that
// studio's usage rows count every chat call it answered, and prints a verdict line per target.
//
//	go run ./bench/chat
//	go run ./bench/chat -db postgres://postgres@127.0.0.1:5432/test -count 3 -duration 5s
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof" // served by the studio process on its own loopback address (-profile)
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"studio/bench/internal/benchdb"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"studio/cmd/server"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
)

// roleEnv names the role of a re-executed process: "studio" or "proxy".
const roleEnv = "BENCH_CHAT_ROLE"

// The targets of the issue.
const (
	targetThroughput = 0.95                  // of the plain proxy's, in every case
	targetP99Gap     = 20 * time.Millisecond // over the plain proxy's p99
	targetP50Gap     = time.Millisecond      // over the plain proxy's p50
	targetRSSMB      = 128.0                 // studio's resident memory after the run
)

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		if err := child(role); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	dbFlag := flag.String("db", "sqlite", "sqlite, or a postgres:// server URL (a fresh database is created on it)")
	clients := flag.Int("clients", 64, "concurrent clients")
	duration := flag.Duration("duration", 3*time.Second, "how long each target is driven in each turn")
	count := flag.Int("count", 3, "turns per case (each turn drives every target once, in rotating order)")
	warmup := flag.Duration("warmup", time.Second, "load sent to each target at the start of each case, not measured")
	delays := flag.String("delays", "0ms,50ms", "upstream delays before the answer, comma-separated (one case each, JSON and SSE)")
	chunks := flag.Int("chunks", 8, "content chunks of a streamed answer")
	only := flag.String("cases", "", "run only these cases, comma-separated (e.g. sse-50ms)")
	accessLog := flag.Bool("access-log", true, "studio writes its per-request access log (to a file in the temporary directory), as studio serve does")
	profileDir := flag.String("profile", "", "write profiles of studio during the first turn of -profile-case into this directory (cpu, allocs, trace)")
	profileCase := flag.String("profile-case", "sse-50ms", "the case -profile profiles")
	sideBySide := flag.Duration("side-by-side", 6*time.Second, "after the turns of each case, drive the three targets at once for this long (-clients each): their latency gaps are measured at the same moments of the machine, and the latency targets are judged on them (0: judged on the turns)")
	perTurn := flag.Bool("turns", false, "also print each turn's p50 per target (to see whether a gap holds in every turn)")
	studioEnv := flag.String("studio-env", "", "extra environment of the studio process, comma-separated (e.g. GOGC=400)")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	o := options{db: *dbFlag, clients: *clients, duration: *duration, count: *count, warmup: *warmup, chunks: *chunks,
		accessLog: *accessLog, profileDir: *profileDir, profileCase: *profileCase, studioEnv: *studioEnv, perTurn: *perTurn, sideBySide: *sideBySide}
	for _, d := range strings.Split(*delays, ",") {
		v, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -delays:", err)
			os.Exit(2)
		}
		o.delays = append(o.delays, v)
	}
	if *only != "" {
		o.only = strings.Split(*only, ",")
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	db                      string
	clients, count, chunks  int
	duration, warmup        time.Duration
	delays                  []time.Duration
	only                    []string
	accessLog               bool
	profileDir, profileCase string
	perTurn                 bool
	sideBySide              time.Duration
	studioEnv               string
}

// target is one way of reaching the fake upstream's chat completions.
type target struct {
	name   string
	url    string
	model  string
	header http.Header
}

// testCase is one kind of call: JSON or SSE answers, with an upstream delay.
type testCase struct {
	stream bool
	delay  time.Duration
}

func (c testCase) String() string {
	kind := "json"
	if c.stream {
		kind = "sse"
	}
	return fmt.Sprintf("%s-%dms", kind, c.delay.Milliseconds())
}

// sample is what one target did in one case: latencies of answered calls, failures, time driven, and
// the CPU time its server process used meanwhile (not measured for direct calls).
type sample struct {
	lat    []time.Duration
	failed int64
	spent  time.Duration
	cpu    time.Duration // the server process's
	gen    time.Duration // this process's: the clients and the fake upstream
	idle   time.Duration // the machine's idle time (all CPUs)
}

// cpuPerCall returns the server's CPU time per answered call.
func (s *sample) cpuPerCall() time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	return s.cpu / time.Duration(len(s.lat))
}

func (s *sample) rps() float64 {
	if s.spent == 0 {
		return 0
	}
	return float64(len(s.lat)) / s.spent.Seconds()
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "studio-chat-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dbURL, dropDB, err := benchdb.Fresh(o.db, dir, "studio_chat_bench")
	if err != nil {
		return err
	}
	defer dropDB()

	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetStream(o.chunks, 0)

	adminKey := models.NewAPIKey()
	proxy, err := startChild("proxy", dir, map[string]string{"BENCH_UPSTREAM": fake.URL})
	if err != nil {
		return err
	}
	defer proxy.stop()
	env := map[string]string{"BENCH_UPSTREAM": fake.URL, "BENCH_DB": dbURL,
		"BENCH_DIR": dir, "BENCH_ADMIN_KEY": adminKey, "BENCH_ACCESS_LOG": strconv.FormatBool(o.accessLog)}
	for _, kv := range strings.Split(o.studioEnv, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	studio, err := startChild("studio", dir, env)
	if err != nil {
		return err
	}
	defer studio.stop()
	key, err := tenantKey("http://"+studio.addr, adminKey)
	if err != nil {
		return err
	}
	targets := []target{
		{name: "direct", url: fake.URL + "/chat/completions", model: "fake-chat"},
		{name: "plain proxy", url: "http://" + proxy.addr + "/v1/chat/completions", model: "fake-chat"},
		{name: "studio", url: "http://" + studio.addr + "/api/chat/completions", model: "service-auto",
			header: http.Header{"X-Api-Key": {key}}},
	}
	const direct, plain, relay = 0, 1, 2
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, DisableCompression: true}}
	var answered atomic.Int64 // chat calls studio answered with 200, warm-ups included
	pids := []int{0, proxy.cmd.Process.Pid, studio.cmd.Process.Pid}
	drive := func(t int, c testCase, d time.Duration) sample {
		before, gen, idle := cpuTime(pids[t]), cpuTime(os.Getpid()), idleTime()
		s := load(client, targets[t], c.stream, o.clients, d)
		s.cpu, s.gen, s.idle = cpuTime(pids[t])-before, cpuTime(os.Getpid())-gen, idleTime()-idle
		if t == relay {
			answered.Add(int64(len(s.lat)))
		}
		return s
	}

	var cases []testCase
	for _, d := range o.delays {
		for _, stream := range []bool{false, true} {
			c := testCase{stream: stream, delay: d}
			if o.only == nil || slices.Contains(o.only, c.String()) {
				cases = append(cases, c)
			}
		}
	}
	fmt.Printf("chat relay benchmark: db=%s, %d clients, %s per target and turn, %d turns, %d streamed chunks, GOMAXPROCS=%d, %d CPUs\n",
		dialect(o.db), o.clients, o.duration, o.count, o.chunks, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Printf("fake upstream in this process; studio (pid %d, access log %v) and the plain proxy (pid %d) in their own processes\n",
		studio.cmd.Process.Pid, o.accessLog, proxy.cmd.Process.Pid)
	fmt.Println("latency: from sending the request to the last byte of the answer (SSE: data: [DONE])")
	if o.sideBySide > 0 {
		fmt.Printf("rows marked ×3: the three targets driven at once for %s (%d clients each), so that each meets the same moments of the machine; the latency targets are judged on them\n",
			o.sideBySide, o.clients)
	}
	fmt.Println()

	results := make([][]sample, len(cases))
	together := make([][]sample, len(cases)) // side by side: every target at once
	for ci, c := range cases {
		if c.delay > 0 {
			fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: c.delay})
		} else {
			fake.SetFault(fakeupstream.Fault{})
		}
		for t := range targets {
			if w := drive(t, c, o.warmup); len(w.lat) == 0 {
				return fmt.Errorf("%s %s: no call succeeded in the warm-up", targets[t].name, c)
			}
		}
		all := make([]sample, len(targets))
		for turn := range o.count {
			for k := range targets {
				t := (turn + k) % len(targets) // rotate the order, so that no target always follows another
				var prof *profiler
				if t == relay && turn == 0 && o.profileDir != "" && o.profileCase == c.String() {
					prof = startProfiles(studio.pprof, o.profileDir, c.String(), o.duration)
				}
				s := drive(t, c, o.duration)
				if o.perTurn {
					fmt.Printf("  %s turn %d %-11s p50 %.2f ms, %d calls\n", c, turn, targets[t].name, ms(pct(s.lat, 0.5)), len(s.lat))
				}
				if prof != nil {
					if err := prof.finish(); err != nil {
						return err
					}
				}
				all[t].lat = append(all[t].lat, s.lat...)
				all[t].failed += s.failed
				all[t].spent += s.spent
				all[t].cpu += s.cpu
				all[t].gen += s.gen
				all[t].idle += s.idle
			}
		}
		results[ci] = all
		if o.sideBySide > 0 {
			sbs := make([]sample, len(targets))
			var wg sync.WaitGroup
			for t := range targets {
				wg.Go(func() { sbs[t] = load(client, targets[t], c.stream, o.clients, o.sideBySide) })
			}
			wg.Wait()
			answered.Add(int64(len(sbs[relay].lat)))
			together[ci] = sbs
		}
		fmt.Printf("%-9s | %-11s | %8s %8s %8s | %9s %9s %9s | %s\n", c, "target", "req/s", "p50 ms", "p99 ms", "vs proxy", "p50 gap", "p99 gap", "CPU/call: server, load+upstream; machine idle")
		for t, tg := range targets {
			s := &all[t]
			fmt.Printf("%-9s | %-11s | %8.0f %8.2f %8.2f |", "", tg.name, s.rps(), ms(pct(s.lat, 0.5)), ms(pct(s.lat, 0.99)))
			if t != direct {
				p := &all[plain]
				fmt.Printf(" %8.1f%% %+9.2f %+9.2f | %6.0f µs,", 100*s.rps()/p.rps(), ms(pct(s.lat, 0.5)-pct(p.lat, 0.5)), ms(pct(s.lat, 0.99)-pct(p.lat, 0.99)),
					float64(s.cpuPerCall().Nanoseconds())/1e3)
			} else {
				fmt.Printf(" %9s %9s %9s | %9s,", "", "", "", "")
			}
			fmt.Printf(" %6.0f µs | %4.0f%% idle", float64(s.gen.Nanoseconds())/1e3/float64(max(len(s.lat), 1)),
				100*s.idle.Seconds()/s.spent.Seconds()/float64(runtime.NumCPU()))
			if s.failed > 0 {
				fmt.Printf("  (%d failed calls)", s.failed)
			}
			fmt.Println()
		}
		if sbs := together[ci]; sbs != nil {
			for t, tg := range targets {
				s := &sbs[t]
				fmt.Printf("%-9s | %-11s | %8s %8.2f %8.2f |", "", tg.name+" ×3", "", ms(pct(s.lat, 0.5)), ms(pct(s.lat, 0.99)))
				if t != direct {
					p := &sbs[plain]
					fmt.Printf(" %9s %+9.2f %+9.2f |", "", ms(pct(s.lat, 0.5)-pct(p.lat, 0.5)), ms(pct(s.lat, 0.99)-pct(p.lat, 0.99)))
				} else {
					fmt.Printf(" %9s %9s %9s |", "", "", "")
				}
				if s.failed > 0 {
					fmt.Printf("  (%d failed calls)", s.failed)
				}
				fmt.Println()
			}
		}
		fmt.Println()
	}

	// Memory after the run, before stopping.
	studioRSS, studioPeak := memory(studio.cmd.Process.Pid)
	proxyRSS, proxyPeak := memory(proxy.cmd.Process.Pid)
	fmt.Printf("resident memory after the run: studio %.0f MB (peak %.0f MB), plain proxy %.0f MB (peak %.0f MB)\n",
		studioRSS, studioPeak, proxyRSS, proxyPeak)
	report, err := studio.stop()
	if err != nil {
		return err
	}
	fmt.Printf("studio process: %s\n", report["runtime"])
	usage, _ := strconv.ParseInt(report["usage"], 10, 64)
	fmt.Printf("usage rows count %d chat calls; studio answered %d (warm-ups included): %s\n", usage, answered.Load(),
		verdict(usage == answered.Load()))
	fmt.Println()

	// Verdicts, one line per target.
	// Throughput is judged on the turns (each target alone); latency on the side-by-side runs when they
	// were made (every target at the same moments), else on the turns.
	var tput, p99, p50, turnP50 []string
	tputOK, p99OK, p50OK := true, true, true
	for ci, c := range cases {
		s, p := &results[ci][relay], &results[ci][plain]
		r := s.rps() / p.rps()
		tputOK = tputOK && r >= targetThroughput
		tput = append(tput, fmt.Sprintf("%s %.1f%%", c, 100*r))
		turnP50 = append(turnP50, fmt.Sprintf("%s %+.2f ms", c, ms(pct(s.lat, 0.5)-pct(p.lat, 0.5))))
		if together[ci] != nil {
			s, p = &together[ci][relay], &together[ci][plain]
		}
		g99 := pct(s.lat, 0.99) - pct(p.lat, 0.99)
		p99OK = p99OK && g99 <= targetP99Gap
		p99 = append(p99, fmt.Sprintf("%s %+.2f ms", c, ms(g99)))
		g50 := pct(s.lat, 0.5) - pct(p.lat, 0.5)
		p50OK = p50OK && g50 < targetP50Gap
		p50 = append(p50, fmt.Sprintf("%s %+.2f ms", c, ms(g50)))
	}
	basis := "in turns"
	if o.sideBySide > 0 {
		basis = "side by side"
	}
	fmt.Printf("target throughput >= 95%% of the plain proxy in every case (in turns): %s (%s)\n", verdict(tputOK), strings.Join(tput, ", "))
	fmt.Printf("target p99 within 20 ms of the plain proxy (%s): %s (%s)\n", basis, verdict(p99OK), strings.Join(p99, ", "))
	fmt.Printf("target < 1 ms added at the median (%s): %s (%s)\n", basis, verdict(p50OK), strings.Join(p50, ", "))
	if o.sideBySide > 0 {
		fmt.Printf("  (median gaps in turns, where each target meets other moments of the machine: %s)\n", strings.Join(turnP50, ", "))
	}
	fmt.Printf("target resident memory after the run < 128 MB: %s (%.0f MB)\n", verdict(studioRSS < targetRSSMB), studioRSS)
	fmt.Printf("usage exact: %s\n", verdict(usage == answered.Load()))
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func dialect(db string) string {
	if db == "sqlite" {
		return "sqlite"
	}
	return "postgres"
}

// proc is a server running in a process of its own.
type proc struct {
	cmd    *exec.Cmd
	addr   string // where it serves
	pprof  string // studio: where it serves net/http/pprof
	out    *bufio.Scanner
	done   bool
	report map[string]string
}

// startChild re-executes this program in a role and waits for the address it serves.
func startChild(role, dir string, env map[string]string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logFile, err := os.Create(filepath.Join(dir, role+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, out: bufio.NewScanner(stdout), report: map[string]string{}}
	for p.out.Scan() {
		k, v, _ := strings.Cut(p.out.Text(), " ")
		p.report[k] = v
		if k == "ready" {
			p.addr, p.pprof = p.report["addr"], p.report["pprof"]
			return p, nil
		}
	}
	_ = cmd.Wait()
	tail, _ := os.ReadFile(logFile.Name())
	return nil, fmt.Errorf("the %s process ended before serving: %s", role, lastLines(tail, 10))
}

// stop asks the process to stop (SIGTERM) and returns what it reported on the way out.
func (p *proc) stop() (map[string]string, error) {
	if p.done {
		return p.report, nil
	}
	p.done = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	for p.out.Scan() {
		k, v, _ := strings.Cut(p.out.Text(), " ")
		p.report[k] = v
	}
	if err := p.cmd.Wait(); err != nil {
		return p.report, fmt.Errorf("%s: %w", p.cmd.Path, err)
	}
	return p.report, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// child runs a server until SIGTERM, printing "addr", "pprof" and "ready" lines on stdout when it
// serves, and on the way out what the parent checks.
func child(role string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	switch role {
	case "proxy":
		up, err := url.Parse(os.Getenv("BENCH_UPSTREAM"))
		if err != nil {
			return err
		}
		proxy := &httputil.ReverseProxy{
			Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: up.Scheme, Host: up.Host}) },
			FlushInterval: -1,
			Transport:     &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, ForceAttemptHTTP2: true},
		}
		srv := &http.Server{Handler: proxy}
		go srv.Serve(ln)
		fmt.Printf("addr %s\nready\n", ln.Addr())
		<-ctx.Done()
		return srv.Close()
	case "studio":
		return studioChild(ctx, ln)
	}
	return fmt.Errorf("unknown role %q", role)
}

// studioChild runs studio as studio serve does (cmd/server and its HTTP server settings), with one chat
// channel on the fake upstream; on the way out it reports its runtime figures and the chat usage counted.
func studioChild(ctx context.Context, ln net.Listener) error {
	if os.Getenv("BENCH_ACCESS_LOG") == "false" {
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	} else {
		// studio serve's logging: slog's default logger (this process never replaces it), access log
		// included, buffered.
		stopLog := server.BufferLog(os.Stderr, 100*time.Millisecond)
		defer stopLog()
	}
	vars := map[string]string{"SERVICE_ADDR": ln.Addr().String(), "DATABASE_URL": os.Getenv("BENCH_DB"),
		"SERVICE_DATA_DIR": os.Getenv("BENCH_DIR"), "SERVICE_ADMIN_KEY": os.Getenv("BENCH_ADMIN_KEY")}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { s, ok := vars[v.Env]; return s, ok })
	if err != nil {
		return err
	}
	ups := []upstream.Config{{Name: "chat-fake", Provider: "fake", Media: upstream.MediaChat, Family: "chat", Protocol: upstream.ProtocolOpenAI,
		BaseURL: os.Getenv("BENCH_UPSTREAM"), APIKey: "bench", Model: "fake-chat", SoftTimeout: time.Minute, Rating: 0.5}}
	svc, err := server.Open(ctx, cfg, server.Options{Upstreams: ups})
	if err != nil {
		return err
	}
	defer svc.Close()
	if err := svc.Start(ctx); err != nil {
		return err
	}
	server.TuneGC(ctx) // as studio serve does
	srv := server.NewHTTPServer(svc.Handler(server.Options{}))
	go srv.Serve(ln)
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(pln, http.DefaultServeMux) // net/http/pprof
	if err := svc.App.Auth().IdentityCacheReady(ctx); err != nil {
		return err
	}
	fmt.Printf("addr %s\npprof %s\nready\n", ln.Addr(), pln.Addr())

	<-ctx.Done()
	shut, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := svc.Stop(shut); err != nil { // writes the batched usage counts
		return err
	}
	fmt.Printf("runtime %s\n", runtimeFigures())
	var counted int64
	if err := svc.DB.Gorm.Model(&models.UsageDaily{}).Where("service = ?", models.ServiceChat).
		Select("COALESCE(SUM(count), 0)").Scan(&counted).Error; err != nil {
		return err
	}
	fmt.Printf("usage %d\n", counted)
	return nil
}

// runtimeFigures summarises the process's garbage collection and scheduling.
func runtimeFigures() string {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/pauses/total/gc:seconds"},
		{Name: "/sched/latencies:seconds"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	pauses := s[1].Value.Float64Histogram()
	sched := s[2].Value.Float64Histogram()
	return fmt.Sprintf("%d GC cycles, GC pause p99 %.2f ms max %.2f ms, scheduling latency p99 %.2f ms, heap goal %.0f MB, GOGC=%q GOMEMLIMIT=%q",
		s[0].Value.Uint64(), 1e3*histPct(pauses, 0.99), 1e3*histPct(pauses, 1), 1e3*histPct(sched, 0.99),
		float64(s[3].Value.Uint64())/(1<<20), os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"))
}

// histPct returns the upper bound of the bucket holding the p-quantile of a runtime histogram.
func histPct(h *metrics.Float64Histogram, p float64) float64 {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(p * float64(total)))
	var n uint64
	for i, c := range h.Counts {
		n += c
		if n >= want && c > 0 {
			if b := h.Buckets[i+1]; !math.IsInf(b, 1) {
				return b
			}
			return h.Buckets[i]
		}
	}
	return 0
}

// profiler fetches profiles of the studio process while a run goes on.
type profiler struct {
	wg   sync.WaitGroup
	errs []error
	mu   sync.Mutex
	base string
	dir  string
	name string
}

// startProfiles starts a CPU profile and an execution trace of the studio process over the run.
func startProfiles(addr, dir, name string, d time.Duration) *profiler {
	p := &profiler{base: "http://" + addr + "/debug/pprof/", dir: dir, name: name}
	secs := max(1, int(d.Seconds())-1)
	p.fetch("profile?seconds="+strconv.Itoa(secs), name+".cpu.pprof")
	p.fetch("trace?seconds=1", name+".trace")
	return p
}

func (p *profiler) fetch(path, file string) {
	p.wg.Go(func() {
		if err := download(p.base+path, filepath.Join(p.dir, file)); err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, err)
			p.mu.Unlock()
		}
	})
}

// finish waits for the profiles and takes the allocation profile (allocations since the start).
func (p *profiler) finish() error {
	p.wg.Wait()
	if err := download(p.base+"allocs", filepath.Join(p.dir, p.name+".allocs.pprof")); err != nil {
		return err
	}
	fmt.Printf("(profiles of studio in %s: %s.cpu.pprof, %s.allocs.pprof, %s.trace)\n", p.dir, p.name, p.name, p.name)
	return errors.Join(p.errs...)
}

func download(u, file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	res, err := http.Get(u)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("%s: status %d", u, res.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cpuTime returns the user and system CPU time a process has used (0 for pid 0).
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses: utime and stime are the
	// 12th and 13th, in clock ticks of 1/100 s.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// idleTime returns the machine's idle time so far, all CPUs together (/proc/stat).
func idleTime() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait ...
	if len(f) < 5 {
		return 0
	}
	idle, _ := strconv.ParseInt(f[4], 10, 64)
	return time.Duration(idle) * 10 * time.Millisecond
}

// memory reads VmRSS and VmHWM of a process, in MB.
func memory(pid int) (rss, peak float64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak
}

// tenantKey creates a tenant through the administrator action and returns its key.
func tenantKey(base, adminKey string) (string, error) {
	body, _ := json.Marshal(map[string]any{"action": "tenant-create", "name": "Bench"})
	req, _ := http.NewRequest("POST", base+"/api/admin", bytes.NewReader(body))
	req.Header.Set("X-API-Key", adminKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var out struct {
		APIKey string `json:"api_key"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || out.APIKey == "" {
		return "", fmt.Errorf("tenant-create answered %d", res.StatusCode)
	}
	return out.APIKey, nil
}

// requestBody returns a small chat completions request.
func requestBody(model string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "messages": []any{
		map[string]any{"role": "system", "content": "You are a helpful assistant."},
		map[string]any{"role": "user", "content": "Write one short sentence about relays."}}})
	return b
}

// call sends one request and reads the whole answer; it returns the time to its last byte.
func call(client *http.Client, t target, body []byte, stream bool) (time.Duration, error) {
	req, _ := http.NewRequest("POST", t.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range t.header {
		req.Header[k] = v
	}
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return 0, fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	if !stream {
		_, err = io.Copy(io.Discard, res.Body)
		return time.Since(start), err
	}
	br := bufio.NewReader(res.Body)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			done = true
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if !done {
		return 0, errors.New("the stream did not end with data: [DONE]")
	}
	return time.Since(start), nil
}

// load drives a target with concurrent clients, back to back, for a duration.
func load(client *http.Client, t target, stream bool, clients int, duration time.Duration) sample {
	body := requestBody(t.model, stream)
	lats := make([][]time.Duration, clients)
	var failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	stop := start.Add(duration)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				d, err := call(client, t, body, stream)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lats[i] = append(lats[i], d)
			}
		})
	}
	wg.Wait()
	s := sample{failed: failed.Load(), spent: time.Since(start)}
	for _, l := range lats {
		s.lat = append(s.lat, l...)
	}
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "%s: %d failed calls, first: %s\n", t.name, s.failed, e)
	}
	return s
}

// pct returns the p-quantile of durations.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
