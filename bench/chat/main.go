// Command chat measures the chat relay POST /api/chat/completions against the physical limit of a
// relay. It starts the fake OpenAI-compatible upstream, a plain httputil.ReverseProxy in front of it,
// and studio in-process over a fresh database with one chat channel on the fake upstream, then drives
// the same requests three ways in one run: straight to the upstream, through the plain proxy, and
// through studio. It prints a table of latency at low concurrency (non-streaming), time to first byte
// of a stream, and throughput at high concurrency, with what each relay adds to the direct figure.
//
//	go run ./bench/chat
//	go run ./bench/chat -db postgres://postgres@127.0.0.1:5432/test -requests 3000 -clients 64 -duration 10s
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"studio/cmd/server"
	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
)

func main() {
	dbFlag := flag.String("db", "sqlite", "sqlite, or a postgres:// server URL (a fresh database is created on it)")
	requests := flag.Int("requests", 2000, "sequential requests per target for the latency figures")
	clients := flag.Int("clients", 64, "concurrent clients for the throughput figure")
	duration := flag.Duration("duration", 5*time.Second, "how long each target is driven for the throughput figure")
	chunks := flag.Int("chunks", 8, "content chunks of a streamed answer")
	accessLog := flag.Bool("access-log", false, "keep studio's per-request access log (written to stderr)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of studio's throughput run to this file")
	memoryHealth := flag.Bool("memory-health", false, "diagnosis: keep routing health in memory instead of one database row per upstream attempt")
	flag.Parse()
	level := slog.LevelWarn
	if *accessLog {
		level = slog.LevelInfo
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	if err := run(*dbFlag, *requests, *clients, *duration, *chunks, *cpuProfile, *memoryHealth); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// target is one way of reaching the fake upstream's chat completions.
type target struct {
	name   string
	url    string
	model  string
	header http.Header
}

func run(dbFlag string, requests, clients int, duration time.Duration, chunks int, cpuProfile string, memoryHealth bool) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "studio-chat-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dbURL, dropDB, err := database(dbFlag, dir)
	if err != nil {
		return err
	}
	defer dropDB()

	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetStream(chunks, 0)

	// The plain reverse proxy: the least any relay does.
	up, _ := url.Parse(fake.URL)
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: up.Scheme, Host: up.Host}) },
		FlushInterval: -1,
		Transport:     &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, ForceAttemptHTTP2: true},
	}
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	proxySrv := &http.Server{Handler: proxy}
	go proxySrv.Serve(proxyLn)
	defer proxySrv.Close()

	// studio with one chat channel on the fake upstream.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	adminKey := models.NewAPIKey()
	vars := map[string]string{"SERVICE_ADDR": ln.Addr().String(), "DATABASE_URL": dbURL, "SERVICE_DATA_DIR": dir, "SERVICE_ADMIN_KEY": adminKey}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { s, ok := vars[v.Env]; return s, ok })
	if err != nil {
		return err
	}
	ups := []upstream.Config{{Name: "chat-fake", Provider: "fake", Media: upstream.MediaChat, Family: "chat", Protocol: upstream.ProtocolOpenAI,
		BaseURL: fake.URL, APIKey: "bench", Model: "fake-chat", SoftTimeout: time.Minute, Rating: 0.5}}
	svc, err := server.Open(ctx, cfg, server.Options{Upstreams: ups})
	if err != nil {
		return err
	}
	defer svc.Close()
	if memoryHealth {
		svc.Jobs.Engine = routing.NewEngine(svc.Upstreams, routing.Options{Store: routing.NewMemoryHealthStore()})
	}
	srv := &http.Server{Handler: svc.Handler(server.Options{})}
	go srv.Serve(ln)
	defer srv.Close()
	if err := svc.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stop, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = svc.Stop(stop)
	}()
	key, err := tenantKey("http://"+ln.Addr().String(), adminKey)
	if err != nil {
		return err
	}
	if err := svc.App.IdentityCacheReady(ctx); err != nil {
		return err
	}

	targets := []target{
		{name: "direct", url: fake.URL + "/chat/completions", model: "fake-chat"},
		{name: "reverse proxy", url: "http://" + proxyLn.Addr().String() + "/v1/chat/completions", model: "fake-chat"},
		{name: "studio", url: "http://" + ln.Addr().String() + "/api/chat/completions", model: "service-auto",
			header: http.Header{"X-Api-Key": {key}}},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, DisableCompression: true}}
	// Failed calls are counted, not fatal: a plain httputil.ReverseProxy breaks a small share of SSE
	// streams (Go issue 40747, see dependencies.md), which is part of what this compares.
	errs := make([]int64, len(targets))
	for i, t := range targets { // warm up connections, pools and caches
		for range 200 {
			if _, _, err := call(client, t, false); err != nil {
				errs[i]++
			}
			if _, _, err := call(client, t, true); err != nil {
				errs[i]++
			}
		}
	}

	health := "database (one row per upstream attempt)"
	if memoryHealth {
		health = "memory (diagnosis)"
	}
	fmt.Printf("chat relay benchmark: db=%s, routing health in %s, fake upstream on loopback (no artificial latency), %d streamed chunks, GOMAXPROCS=%d\n",
		svc.DB.Dialect, health, chunks, runtime.GOMAXPROCS(0))
	fmt.Printf("latency: %d sequential requests per target, interleaved in rounds; throughput: %d clients for %s per target, in 3 interleaved slices\n\n",
		requests, clients, duration)

	// Latency at concurrency 1, interleaved so that machine noise falls on every target alike.
	lat := make([][]time.Duration, len(targets))
	ttfb := make([][]time.Duration, len(targets))
	full := make([][]time.Duration, len(targets))
	const round = 100
	for done := 0; done < requests; done += round {
		for i, t := range targets {
			for range round {
				if d, _, err := call(client, t, false); err != nil {
					errs[i]++
				} else {
					lat[i] = append(lat[i], d)
				}
				if first, total, err := call(client, t, true); err != nil {
					errs[i]++
				} else {
					ttfb[i] = append(ttfb[i], first)
					full[i] = append(full[i], total)
				}
			}
		}
	}
	// Throughput at high concurrency, non-streaming, in interleaved slices so that machine noise falls
	// on every target alike.
	const parts = 3
	okCalls := make([]int64, len(targets))
	spent := make([]time.Duration, len(targets))
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	for range parts {
		for i, t := range targets {
			n, failed, d := throughput(client, t, clients, duration/parts)
			okCalls[i] += n
			errs[i] += failed
			spent[i] += d
		}
	}
	pprof.StopCPUProfile()
	rps := make([]float64, len(targets))
	for i := range targets {
		rps[i] = float64(okCalls[i]) / spent[i].Seconds()
	}

	fmt.Printf("%-13s | %8s %8s %8s | %9s %9s %8s | %10s %8s | %7s %8s\n", "target",
		"p50 ms", "p99 ms", "+p50", "ttfb p50", "ttfb p99", "+ttfb", "stream p50", "+stream", "req/s", "vs proxy")
	fmt.Println(strings.Repeat("-", 118))
	for i, t := range targets {
		p50, t50, f50 := pct(lat[i], 0.5), pct(ttfb[i], 0.5), pct(full[i], 0.5)
		fmt.Printf("%-13s | %8.3f %8.3f %8s | %9.3f %9.3f %8s | %10.3f %8s | %7.0f %8s",
			t.name, ms(p50), ms(pct(lat[i], 0.99)), added(p50, pct(lat[0], 0.5), i),
			ms(t50), ms(pct(ttfb[i], 0.99)), added(t50, pct(ttfb[0], 0.5), i),
			ms(f50), added(f50, pct(full[0], 0.5), i), rps[i], ratio(rps[i], rps[1], i))
		if errs[i] > 0 {
			fmt.Printf("  (%d failed calls)", errs[i])
		}
		fmt.Println()
	}
	fmt.Println()
	studio, proxyIdx := 2, 1
	fmt.Printf("studio adds %.3f ms at the median (target < 1 ms; the plain proxy adds %.3f ms)\n",
		ms(pct(lat[studio], 0.5)-pct(lat[0], 0.5)), ms(pct(lat[proxyIdx], 0.5)-pct(lat[0], 0.5)))
	fmt.Printf("studio adds %.3f ms to the time to first byte of a stream (target < 1 ms; the plain proxy adds %.3f ms)\n",
		ms(pct(ttfb[studio], 0.5)-pct(ttfb[0], 0.5)), ms(pct(ttfb[proxyIdx], 0.5)-pct(ttfb[0], 0.5)))
	fmt.Printf("studio throughput at %d clients: %.0f%% of the plain proxy's (target >= 80%%)\n", clients, 100*rps[studio]/rps[proxyIdx])
	if err := svc.App.FlushUsage(ctx); err != nil {
		return err
	}
	var counted int64
	svc.DB.Model(&models.UsageDaily{}).Where("service = ?", models.ServiceChat).Select("COALESCE(SUM(count), 0)").Scan(&counted)
	fmt.Printf("usage rows count %d chat calls through studio\n", counted)
	return nil
}

// database returns the URL of a fresh database and a function that drops it.
func database(dbFlag, dir string) (string, func(), error) {
	if dbFlag == "sqlite" {
		return "sqlite://" + filepath.Join(dir, "studio.db"), func() {}, nil
	}
	name := fmt.Sprintf("studio_chat_bench_%d", time.Now().UnixNano())
	admin, err := sql.Open("pgx", dbFlag)
	if err != nil {
		return "", nil, err
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		return "", nil, err
	}
	u, _ := url.Parse(dbFlag)
	u.Path = "/" + name
	return u.String(), func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		admin.Close()
	}, nil
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

// body returns a small chat completions request.
func body(model string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "messages": []any{
		map[string]any{"role": "system", "content": "You are a helpful assistant."},
		map[string]any{"role": "user", "content": "Write one short sentence about relays."}}})
	return b
}

// call sends one request and reads the whole answer; it returns the time to the first byte of the
// body (streams: the first data line) and the total time.
func call(client *http.Client, t target, stream bool) (first, total time.Duration, err error) {
	req, _ := http.NewRequest("POST", t.url, bytes.NewReader(body(t.model, stream)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range t.header {
		req.Header[k] = v
	}
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return 0, 0, fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	if !stream {
		_, err = io.Copy(io.Discard, res.Body)
		d := time.Since(start)
		return d, d, err
	}
	br := bufio.NewReader(res.Body)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if first == 0 && bytes.HasPrefix(line, []byte("data:")) {
			first = time.Since(start)
		}
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			done = true
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if !done {
		return 0, 0, errors.New("the stream did not end with data: [DONE]")
	}
	return first, time.Since(start), nil
}

// throughput drives a target with concurrent clients for a duration; it returns the calls that
// succeeded and failed and the time taken.
func throughput(client *http.Client, t target, clients int, duration time.Duration) (ok, failed int64, took time.Duration) {
	var okN, failedN atomic.Int64
	stop := time.Now().Add(duration)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if _, _, err := call(client, t, false); err != nil {
					failedN.Add(1)
					continue
				}
				okN.Add(1)
			}
		})
	}
	wg.Wait()
	return okN.Load(), failedN.Load(), time.Since(start)
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

// added formats what a relay adds to the direct figure ("" for the direct row).
func added(d, direct time.Duration, i int) string {
	if i == 0 {
		return ""
	}
	return fmt.Sprintf("%+.3f", ms(d-direct))
}

// ratio formats a throughput relative to the plain proxy's ("" for the direct row).
func ratio(v, proxy float64, i int) string {
	if i == 0 || proxy == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*v/proxy)
}
