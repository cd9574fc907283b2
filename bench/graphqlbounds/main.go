// Command graphqlbounds measures what large GraphQL documents cost studio: it starts studio in-process
// over a fresh database (the wiring `studio serve` uses) and, without a key,
//
//  1. times the refusal of one document of -aliases aliases of __typename (POST /graphql; median of
//     -repeat), and of the same document as a WebSocket subscribe message (with a tenant key, which
//     connection_init needs);
//  2. measures GET /api/health (every 2 ms, one at a time): alone; during -bursts bursts of -parallel
//     such documents sent at once (the "100 in parallel"; health requests started while a burst
//     was being answered are counted); and while -parallel clients send them back to back for -duration
//     (the CPU is then saturated, and a health request waits its turn among -parallel others); p50/p99/
//     max, and the process's CPU time per document;
//  3. does the same with the largest document the bounds accept (-accepted-fields fields, ten at each
//     response path), which is validated and executed.
//
// The figures include the load generator, which runs in the same process (the documents are encoded
// once), and whatever else runs on the machine (the load average is printed).
//
//	go run ./bench/graphqlbounds
//	go run ./bench/graphqlbounds -aliases 20000 -parallel 100 -duration 10s
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
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
	dbFlag := flag.String("db", "sqlite", "sqlite, or a postgres:// server URL (a fresh database is created on it)")
	aliases := flag.Int("aliases", 10_000, "aliases of __typename in the refused document (all under one response name)")
	parallel := flag.Int("parallel", 100, "clients sending documents at once")
	duration := flag.Duration("duration", 5*time.Second, "how long the clients send documents")
	repeat := flag.Int("repeat", 21, "refusals timed one by one (the median is printed)")
	flag.IntVar(&bursts, "bursts", 30, "bursts of -parallel documents sent at once (after one to warm up, not counted)")
	accepted := flag.Int("accepted-fields", 1000, "fields of the accepted document of phase 3 (0 skips it)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err := run(*dbFlag, *aliases, *parallel, *duration, *repeat, *accepted); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(dbFlag string, aliases, parallel int, duration time.Duration, repeat, acceptedFields int) error {
	ctx := context.Background()
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
	vars := map[string]string{"SERVICE_ADDR": ln.Addr().String(), "DATABASE_URL": dbURL, "SERVICE_DATA_DIR": dir,
		"SERVICE_ADMIN_KEY": models.NewAPIKey()}
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
	defer srv.Close()
	if err := svc.Events.Start(ctx); err != nil {
		return err
	}
	defer svc.Events.Stop()
	raw, err := svc.App.Admin.Run(ctx, models.Operator(), []byte(`{"action":"tenant-create","name":"Bench","credits":1}`))
	if err != nil {
		return err
	}
	var created struct {
		APIKey string `json:"api_key"`
	}
	if b, err := json.Marshal(raw); err == nil {
		_ = json.Unmarshal(b, &created)
	}
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: parallel + 8}, Timeout: 5 * time.Minute}

	refusedDoc := "{" + strings.Repeat(" a: __typename", aliases) + " }"
	refusedBody, _ := json.Marshal(map[string]any{"query": refusedDoc})
	fmt.Printf("studio GraphQL document bounds: db=%s cores=%d GOMAXPROCS=%d document=%d aliases (%d kB) load average %s\n",
		svc.DB.Dialect, runtime.NumCPU(), runtime.GOMAXPROCS(0), aliases, len(refusedDoc)/1000, loadAverage())
	defer func() { fmt.Printf("load average at the end: %s\n", loadAverage()) }()

	// 1. One refusal at a time.
	status, answer, err := post(client, base, refusedBody)
	if err != nil {
		return err
	}
	fmt.Printf("answer: %d %.200s\n", status, answer)
	times := make([]time.Duration, 0, repeat)
	for range repeat {
		start := time.Now()
		if _, _, err := post(client, base, refusedBody); err != nil {
			return err
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	fmt.Printf("refusal over POST: median %s, max %s (%d documents one by one; target < 50 ms)\n",
		ms(times[len(times)/2]), ms(times[len(times)-1]), repeat)
	if d, msg, err := websocketRefusal(base, created.APIKey, refusedDoc); err != nil {
		fmt.Printf("refusal over WebSocket: %v\n", err)
	} else {
		fmt.Printf("refusal over WebSocket: %s (%.160s)\n", ms(d), msg)
	}

	// 2. /api/health alone, during bursts of documents sent at once, then under a sustained flood.
	quiet := health(client, base, time.Second, nil)
	fmt.Printf("/api/health alone: %s\n", quiet)
	fmt.Printf("/api/health during %d bursts of %d %d-alias documents sent at once: %s (target p99 < 50 ms)\n",
		bursts, parallel, aliases, burst(client, base, refusedBody, parallel, bursts))
	load := health(client, base, duration, func(stop <-chan struct{}) int64 {
		return flood(client, base, refusedBody, parallel, stop)
	})
	fmt.Printf("/api/health while %d clients send %d-alias documents back to back for %s: %s\n", parallel, aliases, duration, load)

	// 3. The largest document the bounds accept: validated and executed.
	if acceptedFields > 0 {
		var b strings.Builder
		b.WriteString("{")
		for i := range acceptedFields {
			fmt.Fprintf(&b, " a%d: __typename", i/10)
		}
		b.WriteString(" }")
		okBody, _ := json.Marshal(map[string]any{"query": b.String()})
		status, answer, err := post(client, base, okBody)
		if err != nil {
			return err
		}
		if status != http.StatusOK || bytes.Contains(answer, []byte(`"errors"`)) {
			return fmt.Errorf("the accepted document was refused: %d %.300s", status, answer)
		}
		fmt.Printf("/api/health during %d bursts of %d accepted %d-field documents: %s\n",
			bursts, parallel, acceptedFields, burst(client, base, okBody, parallel, bursts))
		load := health(client, base, duration, func(stop <-chan struct{}) int64 {
			return flood(client, base, okBody, parallel, stop)
		})
		fmt.Printf("/api/health while %d clients send accepted %d-field documents back to back: %s\n", parallel, acceptedFields, load)
	}
	return nil
}

var bursts int

// burst sends count bursts of n documents at once (each burst waits for its answers, then 300 ms),
// while /api/health is requested every 2 ms; it returns the latencies of the health requests that
// started during a burst, and the CPU time per document.
func burst(client *http.Client, base string, body []byte, n, count int) healthFigures {
	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var samples []sample
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			t := time.Now()
			if res, err := client.Get(base + "/api/health"); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			samples = append(samples, sample{t, time.Since(t)})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	type window struct{ from, to time.Time }
	var windows []window
	var f healthFigures
	// A first burst opens the connections; it is not counted.
	var warm sync.WaitGroup
	for range n {
		warm.Add(1)
		go func() { defer warm.Done(); _, _, _ = post(client, base, body) }()
	}
	warm.Wait()
	cpu0, start := cpuTime(), time.Now()
	for range count {
		time.Sleep(300 * time.Millisecond)
		w := window{from: time.Now()}
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := post(client, base, body); err == nil {
					atomic.AddInt64(&f.documents, 1)
				}
			}()
		}
		wg.Wait()
		w.to = time.Now()
		windows = append(windows, w)
		f.longest = max(f.longest, w.to.Sub(w.from))
	}
	close(stop)
	<-sampled
	f.wall, f.cpu = time.Since(start), cpuTime()-cpu0
	var lat []time.Duration
	for _, s := range samples {
		for _, w := range windows {
			if !s.at.Before(w.from) && s.at.Before(w.to) {
				lat = append(lat, s.lat)
				break
			}
		}
	}
	if len(lat) == 0 {
		return f
	}
	slices.Sort(lat)
	f.n = len(lat)
	f.p50, f.p99, f.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	f.burst = true
	return f
}

// post sends one GraphQL body and returns the status and the answer.
func post(client *http.Client, base string, body []byte) (int, []byte, error) {
	res, err := client.Post(base+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	return res.StatusCode, answer, err
}

// flood has n clients post body back to back until stop closes; it returns how many were answered.
func flood(client *http.Client, base string, body []byte, n int, stop <-chan struct{}) int64 {
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := post(client, base, body); err == nil {
					sent.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return sent.Load()
}

// healthFigures are the latencies of /api/health during one phase.
type healthFigures struct {
	n             int
	p50, p99, max time.Duration
	documents     int64
	cpu           time.Duration
	wall          time.Duration
	burst         bool          // the figures of burst
	longest       time.Duration // the longest burst, from the first document sent to the last answer
}

func (h healthFigures) String() string {
	s := fmt.Sprintf("p50 %s p99 %s max %s (%d requests)", ms(h.p50), ms(h.p99), ms(h.max), h.n)
	switch {
	case h.burst:
		s += fmt.Sprintf("; longest burst %s; process CPU %s per document", ms(h.longest), ms(h.cpu/time.Duration(max(h.documents, 1))))
	case h.documents > 0:
		s += fmt.Sprintf("; %d documents answered (%.0f/s), process CPU %.2f s = %s per document",
			h.documents, float64(h.documents)/h.wall.Seconds(), h.cpu.Seconds(), ms(h.cpu/time.Duration(h.documents)))
	}
	return s
}

// health requests /api/health one after another for d, while load (when given) runs until the end.
func health(client *http.Client, base string, d time.Duration, load func(stop <-chan struct{}) int64) healthFigures {
	stop := make(chan struct{})
	done := make(chan int64, 1)
	cpu0 := cpuTime()
	start := time.Now()
	if load != nil {
		go func() { done <- load(stop) }()
		time.Sleep(200 * time.Millisecond) // the clients are all sending
	}
	var lat []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); {
		t := time.Now()
		res, err := client.Get(base + "/api/health")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		lat = append(lat, time.Since(t))
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	var f healthFigures
	if load != nil {
		f.documents = <-done
	}
	f.wall, f.cpu = time.Since(start), cpuTime()-cpu0
	slices.Sort(lat)
	f.n = len(lat)
	f.p50, f.p99, f.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	return f
}

// websocketRefusal sends doc as a graphql-transport-ws subscribe message and times the answer.
func websocketRefusal(base, key, doc string) (time.Duration, string, error) {
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second}
	conn, _, err := d.Dial("ws"+strings.TrimPrefix(base, "http")+"/graphql", nil)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Minute))
	if err := conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"X-API-Key": key}}); err != nil {
		return 0, "", err
	}
	var m struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := conn.ReadJSON(&m); err != nil || m.Type != "connection_ack" {
		return 0, "", fmt.Errorf("connection_init: %v %s", err, m.Type)
	}
	start := time.Now()
	payload, _ := json.Marshal(map[string]any{"query": doc})
	if err := conn.WriteJSON(map[string]any{"type": "subscribe", "id": "1", "payload": json.RawMessage(payload)}); err != nil {
		return 0, "", err
	}
	for {
		if err := conn.ReadJSON(&m); err != nil {
			return 0, "", err
		}
		if m.Type != "ping" && m.Type != "pong" {
			return time.Since(start), m.Type + " " + string(m.Payload), nil
		}
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the first three fields of /proc/loadavg: the machine may be busy with more than this run.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
