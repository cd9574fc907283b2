// Command submit measures image job submission: it starts studio in-process over a fresh database with a
// fast fake OpenAI-compatible upstream on loopback, drives POST /api/generate from concurrent clients for a fixed time, and prints
// accepted submits per second, p50/p99 submit latency and completed jobs per second.
//
//	go run ./bench/submit -db sqlite -duration 20s -clients 32
//	go run ./bench/submit -db postgres://postgres@127.0.0.1:5432/test -duration 20s -clients 32
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
	clients := flag.Int("clients", 32, "concurrent clients")
	latency := flag.Duration("upstream-latency", 5*time.Millisecond, "latency of the fake image upstream")
	workers := flag.Int("workers", 100, "job workers")
	keep := flag.Bool("keep-data", false, "keep the data directory (media, SQLite file) instead of deleting it: on ext4 without a journal, "+
		"thousands of files deleted slow file creation for the next few minutes, and with it the next run")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	if err := run(*dbFlag, *duration, *clients, *latency, *workers, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(dbFlag string, duration time.Duration, clients int, latency time.Duration, workers int, keep bool) error {
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
		admin, err := sql.Open("pgx", dbFlag)
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
	svc, err := server.Open(ctx, cfg, server.Options{Upstreams: ups, Jobs: jobs.Options{MaxWorkers: workers}})
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

	fmt.Printf("studio submit benchmark: db=%s clients=%d duration=%s upstream latency=%s workers=%d\n",
		svc.DB.Dialect, clients, duration, latency, workers)
	var accepted, failed atomic.Int64
	lat := make([][]time.Duration, clients)
	stop := time.Now().Add(duration)
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				t0 := time.Now()
				status, _, err := post("/api/generate", created.APIKey, map[string]any{"prompt": fmt.Sprintf("bench %d-%d", c, i)})
				lat[c] = append(lat[c], time.Since(t0))
				if err != nil || status != 200 {
					failed.Add(1)
					continue
				}
				accepted.Add(1)
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	pprof.StopCPUProfile() // the profile covers the submit phase only
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[int(float64(len(all)-1)*p)]
	}
	// Completed jobs: wait for the queue to drain, then rate = jobs ended / time since the first submit.
	var ended int64
	for {
		svc.DB.Model(&models.Job{}).Where("status <> ?", models.JobPending).Count(&ended)
		if ended >= accepted.Load() || time.Since(start) > duration*4 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Since(start)
	var doneN int64
	svc.DB.Model(&models.Job{}).Where("status = ?", models.JobDone).Count(&doneN)
	fmt.Printf("accepted submits: %d (%.0f/s), errors: %d\n", accepted.Load(), float64(accepted.Load())/elapsed.Seconds(), failed.Load())
	fmt.Printf("submit latency: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", ms(pct(0.5)), ms(pct(0.99)), ms(pct(1)))
	fmt.Printf("completed jobs: %d done of %d in %.1f s (%.0f/s)\n", doneN, ended, drained.Seconds(), float64(ended)/drained.Seconds())
	shutdown, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	return svc.Stop(shutdown)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
