// Command subscriptions measures GraphQL subscriptions: it starts studio in-process over a fresh database,
// creates one pending image job per subscription, and has a client process (this program re-executed)
// open the WebSocket connections and subscribe to jobProgress(id) for every job. Then it changes each job
// once, at a steady rate, and prints the p50/p99 delivery latency (from the change to the client's
// receipt) and the resident memory of the server process (VmRSS with every subscription open, and the
// peak VmHWM). The clients live in their own process so that the server's figures are its own, and
// because one process may hold at most RLIMIT_NOFILE descriptors.
//
//	go run ./bench/subscriptions -subs 10000 -conns 10000
//	go run ./bench/subscriptions -subs 10000 -conns 100 -db postgres://postgres@127.0.0.1:5432/test
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"studio/bench/internal/benchdb"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	_ "github.com/jackc/pgx/v5/stdlib"

	"studio/cmd/server"
	"studio/models"
)

func main() {
	client := flag.Bool("client", false, "internal: run as the client process (reads its plan on stdin)")
	dbFlag := flag.String("db", "sqlite", "sqlite, or a postgres:// server URL (a fresh database is created on it)")
	subs := flag.Int("subs", 10000, "subscriptions (one job each)")
	conns := flag.Int("conns", 10000, "WebSocket connections the subscriptions are spread over (at most 100 per connection)")
	rate := flag.Int("rate", 2000, "job changes per second")
	proto := flag.String("proto", "graphql-transport-ws", "graphql-transport-ws or graphql-ws")
	flag.StringVar(&memProfile, "memprofile", "", "write a heap profile of the server with every subscription open")
	flag.Parse()
	raiseFileLimit()
	if memProfile != "" {
		runtime.MemProfileRate = 64 // precise enough to tell where each connection's bytes go
	}
	// Queueing 10 000 first reads on SQLite's one connection logs slow statements: keep the output to the figures.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	var err error
	if *client {
		err = runClient(os.Stdin, os.Stdout)
	} else {
		err = runServer(*dbFlag, *subs, *conns, *rate, *proto)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

var memProfile string

// raiseFileLimit lifts the soft limit of open files to the hard limit.
func raiseFileLimit() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
}

// plan is what the server process tells the client process.
type plan struct {
	URL    string   `json:"url"`
	Key    string   `json:"key"`
	Proto  string   `json:"proto"`
	Conns  int      `json:"conns"`
	JobIDs []string `json:"job_ids"`
}

// result is what the client process answers: the latency of each delivered change, in milliseconds.
type result struct {
	LatenciesMS []float64 `json:"latencies_ms"`
	Missing     int       `json:"missing"`
	Errors      []string  `json:"errors"`
}

// notePrefix starts the progress note of a benchmark change; the change's time follows (Unix ns).
const notePrefix = "bench "

func runServer(dbFlag string, subs, conns, rate int, proto string) error {
	ctx := context.Background()
	if conns > subs {
		conns = subs
	}
	if (subs+conns-1)/conns > 100 {
		return fmt.Errorf("%d subscriptions over %d connections is more than 100 per connection", subs, conns)
	}
	dir, err := os.MkdirTemp("", "studio-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dbURL, dropDB, err := benchdb.Fresh(dbFlag, dir, "studio_bench")
	if err != nil {
		return err
	}
	defer dropDB()
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
	svc, err := server.Open(ctx, cfg, server.Options{})
	if err != nil {
		return err
	}
	defer svc.Close()
	srv := &http.Server{Handler: svc.Handler(server.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	// Only the event broker runs: no worker picks the jobs up, so each changes exactly when told to.
	if err := svc.Events.Start(ctx); err != nil {
		return err
	}
	defer svc.Events.Stop()

	raw, err := svc.App.Admin.Run(ctx, models.Operator(), []byte(`{"action":"tenant-create","name":"Bench","credits":100000000}`))
	if err != nil {
		return err
	}
	var created struct {
		APIKey string `json:"api_key"`
	}
	if b, err := json.Marshal(raw); err == nil {
		_ = json.Unmarshal(b, &created)
	}
	id, err := svc.App.Auth().ResolveIdentity(ctx, created.APIKey)
	if err != nil {
		return err
	}
	fmt.Printf("studio subscription benchmark: db=%s subscriptions=%d connections=%d protocol=%s rate=%d/s cores=%d\n",
		svc.DB.Dialect, subs, conns, proto, rate, runtime.NumCPU())
	jobIDs := make([]string, 0, subs)
	prompt := "bench"
	for len(jobIDs) < subs {
		batch := make([]models.GenerateRequest, min(models.MaxBatch, subs-len(jobIDs)))
		for i := range batch {
			batch[i] = models.GenerateRequest{Prompt: &prompt}
		}
		js, err := svc.Jobs.App.Jobs().SubmitImages(ctx, id, batch)
		if err != nil {
			return fmt.Errorf("create jobs: %w", err)
		}
		for _, j := range js {
			jobIDs = append(jobIDs, j.ID)
		}
	}
	rssIdle := memory("VmRSS")

	// The client process subscribes; it answers "ready" once every subscription sent its current state.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-client")
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := json.NewEncoder(stdin).Encode(plan{URL: "ws://" + ln.Addr().String() + "/graphql", Key: created.APIKey,
		Proto: proto, Conns: conns, JobIDs: jobIDs}); err != nil {
		return err
	}
	lines := bufio.NewReader(stdout)
	start := time.Now()
	line, err := lines.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		return fmt.Errorf("client: %q %v", line, err)
	}
	subscribed := time.Since(start)
	runtime.GC()
	rssOpen := memory("VmRSS")
	open := svc.Events.Subscribers()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("subscribed: %d subscriptions open in %.1f s; server goroutines %d, heap in use %.0f MB, stacks %.0f MB\n",
		open, subscribed.Seconds(), runtime.NumGoroutine(), float64(ms.HeapInuse)/(1<<20), float64(ms.StackInuse)/(1<<20))
	if memProfile != "" {
		if f, err := os.Create(memProfile); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
		if f, err := os.Create(memProfile + ".goroutines"); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 1)
			f.Close()
		}
	}

	// One change per job at a steady rate; each note carries the time of the change.
	emitStart := time.Now()
	work := make(chan string, 1024)
	var wg sync.WaitGroup
	var emitErrs atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jobID := range work {
				note := notePrefix + strconv.FormatInt(time.Now().UnixNano(), 10)
				if err := svc.App.Jobs().SetJobProgress(ctx, jobID, note); err != nil {
					emitErrs.Add(1)
				}
			}
		}()
	}
	interval := time.Second / time.Duration(rate)
	for i, jobID := range jobIDs {
		if wait := time.Until(emitStart.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		work <- jobID
	}
	close(work)
	wg.Wait()
	emitted := time.Since(emitStart)

	var res result
	if err := json.NewDecoder(lines).Decode(&res); err != nil {
		return fmt.Errorf("client result: %w", err)
	}
	lat := res.LatenciesMS
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(float64(len(lat)-1)*p)]
	}
	fmt.Printf("changes: %d in %.1f s (%.0f/s), errors %d\n", len(jobIDs), emitted.Seconds(), float64(len(jobIDs))/emitted.Seconds(), emitErrs.Load())
	fmt.Printf("delivered: %d of %d (missing %d)\n", len(lat), len(jobIDs), res.Missing)
	fmt.Printf("delivery latency: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n", pct(0.5), pct(0.9), pct(0.99), pct(1))
	fmt.Printf("server memory: VmRSS %.0f MB before subscribing, %.0f MB with %d subscriptions open; peak VmHWM %.0f MB\n",
		rssIdle, rssOpen, open, memory("VmHWM"))
	if len(res.Errors) > 0 {
		fmt.Printf("client errors (%d), first: %s\n", len(res.Errors), res.Errors[0])
	}
	_ = stdin.Close()
	shutdown, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	return nil
}

// memory reads a size field (VmRSS, VmHWM) of /proc/self/status, in MB.
func memory(field string) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// runClient opens the connections of the plan, subscribes, says "ready", and reports the latencies of
// the benchmark changes when every subscription received one (or 60 s after the first arrived).
func runClient(in io.Reader, out io.Writer) error {
	var p plan
	dec := json.NewDecoder(in)
	if err := dec.Decode(&p); err != nil {
		return err
	}
	perConn := (len(p.JobIDs) + p.Conns - 1) / p.Conns
	c := &clients{plan: p, latencies: make([]float64, len(p.JobIDs)), got: make([]atomic.Bool, len(p.JobIDs)),
		current: make(chan struct{}, len(p.JobIDs)), bench: make(chan struct{}, len(p.JobIDs))}
	var wg sync.WaitGroup
	dials := make(chan struct{}, 64) // connections opened at once
	for n := 0; n*perConn < len(p.JobIDs); n++ {
		first, last := n*perConn, min((n+1)*perConn, len(p.JobIDs))
		wg.Add(1)
		dials <- struct{}{}
		go func() {
			defer wg.Done()
			err := c.connect(n, first, last)
			<-dials
			if err != nil {
				c.fail(err)
			}
		}()
	}
	wg.Wait()
	for range p.JobIDs {
		<-c.current
	}
	fmt.Fprintln(out, "ready")
	want := len(p.JobIDs)
	timeout := time.After(10 * time.Minute)
	for received := 0; received < want; received++ {
		select {
		case <-c.bench:
			if received == 0 {
				timeout = time.After(60 * time.Second)
			}
		case <-timeout:
			received = want
		}
	}
	var res result
	for i := range c.latencies {
		if c.got[i].Load() {
			res.LatenciesMS = append(res.LatenciesMS, c.latencies[i])
		} else {
			res.Missing++
		}
	}
	c.mu.Lock()
	res.Errors = c.errs
	c.mu.Unlock()
	return json.NewEncoder(out).Encode(res)
}

// clients are the benchmark's WebSocket clients.
type clients struct {
	plan      plan
	latencies []float64
	got       []atomic.Bool
	current   chan struct{} // one per subscription that sent its current state
	bench     chan struct{} // one per subscription that received its benchmark change
	mu        sync.Mutex
	errs      []string
}

func (c *clients) fail(err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err.Error())
	c.mu.Unlock()
}

// sources are the loopback addresses connections come from, so that no one address runs out of ports.
var sources = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7", "127.0.0.8"}

var writeBuffers sync.Pool

type wsMessage struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

const subscription = `subscription($id: ID!) { jobProgress(id: $id) { status progress } }`

// connect opens connection n and subscribes to the jobs first..last-1; a goroutine then reads it.
func (c *clients) connect(n, first, last int) error {
	src := &net.TCPAddr{IP: net.ParseIP(sources[n%len(sources)])}
	d := websocket.Dialer{
		Subprotocols: []string{c.plan.Proto}, HandshakeTimeout: 30 * time.Second,
		ReadBufferSize: 1024, WriteBufferSize: 1024, WriteBufferPool: &writeBuffers,
		NetDialContext: (&net.Dialer{LocalAddr: src, Timeout: 30 * time.Second}).DialContext,
	}
	conn, _, err := d.Dial(c.plan.URL, nil)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	var wmu sync.Mutex
	write := func(m wsMessage) error {
		wmu.Lock()
		defer wmu.Unlock()
		return conn.WriteJSON(m)
	}
	initPayload, _ := json.Marshal(map[string]string{"X-API-Key": c.plan.Key})
	if err := write(wsMessage{Type: "connection_init", Payload: initPayload}); err != nil {
		return err
	}
	for {
		var m wsMessage
		if err := conn.ReadJSON(&m); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		if m.Type == "connection_ack" {
			break
		}
	}
	start := "subscribe"
	if c.plan.Proto == "graphql-ws" {
		start = "start"
	}
	for i := first; i < last; i++ {
		payload, _ := json.Marshal(map[string]any{"query": subscription, "variables": map[string]string{"id": c.plan.JobIDs[i]}})
		if err := write(wsMessage{Type: start, ID: strconv.Itoa(i), Payload: payload}); err != nil {
			return err
		}
	}
	go c.read(conn, write)
	return nil
}

// read handles one connection's messages: current states, benchmark changes and pings.
func (c *clients) read(conn *websocket.Conn, write func(wsMessage) error) {
	for {
		var m wsMessage
		if err := conn.ReadJSON(&m); err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.fail(fmt.Errorf("read: %w", err))
			}
			return
		}
		switch m.Type {
		case "ping":
			_ = write(wsMessage{Type: "pong"})
		case "next", "data":
			i, err := strconv.Atoi(m.ID)
			if err != nil || i < 0 || i >= len(c.latencies) {
				continue
			}
			var p struct {
				Data struct {
					JobProgress struct {
						Progress string `json:"progress"`
					} `json:"jobProgress"`
				} `json:"data"`
			}
			_ = json.Unmarshal(m.Payload, &p)
			note := p.Data.JobProgress.Progress
			ts, ok := strings.CutPrefix(note, notePrefix)
			if !ok {
				c.current <- struct{}{}
				continue
			}
			at, _ := strconv.ParseInt(ts, 10, 64)
			if !c.got[i].Swap(true) {
				c.latencies[i] = float64(time.Now().UnixNano()-at) / 1e6
				c.bench <- struct{}{}
			}
		case "error":
			c.fail(fmt.Errorf("subscription %s: %s", m.ID, m.Payload))
		}
	}
}
