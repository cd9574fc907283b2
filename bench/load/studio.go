package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"studio/bench/internal/benchapi"
	"studio/bench/internal/benchdb"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"studio/cmd/server"
	"studio/jobs"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
)

// fakeTiming is how the fake upstreams of the in-process server behave.
type fakeTiming struct {
	image      time.Duration // per image generation call
	chat       time.Duration // before a chat answer (or the first byte of a stream)
	video      time.Duration // per video call (create, status, content)
	videoPolls int           // status requests until a video is completed
	videoPoll  time.Duration // how often studio checks a running video task
}

// local is studio started in this process over a fresh database, with fake upstreams on loopback.
type local struct {
	base     string
	adminKey string
	svc      *server.Service
	srv      *http.Server
	fake     *fakeupstream.Server
	dir      string
	dropDB   func()
	stopped  bool
}

// startLocal creates a fresh database (a SQLite file, or a new database on the PostgreSQL server of
// dbFlag), starts the fake upstreams and studio with its workers, and serves it on a loopback port.
func startLocal(ctx context.Context, dbFlag string, timing fakeTiming, workers int) (_ *local, err error) {
	l := &local{dropDB: func() {}}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if l.dir, err = os.MkdirTemp("", "studio-load-"); err != nil {
		return nil, err
	}
	dbURL, dropDB, err := benchdb.Fresh(dbFlag, l.dir, "studio_load_bench")
	if err != nil {
		return nil, err
	}
	l.dropDB = dropDB

	l.fake = fakeupstream.New()
	l.fake.SetVideoPolls(timing.videoPolls)
	for channel, d := range map[string]time.Duration{"img": timing.image, "chat": timing.chat, "vid": timing.video} {
		if d > 0 {
			l.fake.SetChannelFault(channel, fakeupstream.Fault{Mode: fakeupstream.Slow, Delay: d})
		}
	}
	tierA := []string{upstream.TierA20Pro, upstream.TierA20Fast, upstream.TierA20Mini, upstream.TierA25Pro}
	ups := []upstream.Config{
		{Name: "img", Provider: "fake", Media: upstream.MediaImage, Family: "gen2", Protocol: upstream.ProtocolOpenAI,
			BaseURL: l.fake.ChannelURL("img"), APIKey: "load", Model: "fake-image", SoftTimeout: time.Minute, CostUSD: 0.01,
			Rating: 0.5, Capabilities: []upstream.Capability{upstream.CapReferenceImages, upstream.CapQuality}},
		{Name: "chat", Provider: "fake", Media: upstream.MediaChat, Family: "chat", Protocol: upstream.ProtocolOpenAI,
			BaseURL: l.fake.ChannelURL("chat"), APIKey: "load", Model: "fake-chat", SoftTimeout: time.Minute, CostUSD: 0.001,
			Rating: 0.5, Capabilities: []upstream.Capability{upstream.CapVision}},
		{Name: "vid", Provider: "fake", Media: upstream.MediaVideo, Family: "vidA", Protocol: upstream.ProtocolOpenAI,
			BaseURL: l.fake.ChannelURL("vid"), APIKey: "load", SoftTimeout: time.Minute, CostUSD: 0.05, Rating: 0.5,
			Tiers: tierA, Capabilities: []upstream.Capability{upstream.CapImages, upstream.CapGenerateAudio}},
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l.base = "http://" + ln.Addr().String()
	l.adminKey = models.NewAPIKey()
	vars := map[string]string{"SERVICE_ADDR": ln.Addr().String(), "DATABASE_URL": dbURL, "SERVICE_DATA_DIR": l.dir,
		"SERVICE_ADMIN_KEY": l.adminKey, "SERVICE_GENERATE_RATE": "100000000", "SERVICE_UPLOAD_RATE": "100000000"}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { s, ok := vars[v.Env]; return s, ok })
	if err != nil {
		ln.Close()
		return nil, err
	}
	l.svc, err = server.Open(ctx, cfg, server.Options{Upstreams: ups,
		Jobs: jobs.Options{MaxWorkers: workers, VideoPoll: timing.videoPoll}})
	if err != nil {
		ln.Close()
		return nil, err
	}
	l.srv = &http.Server{Handler: l.svc.Handler(server.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go l.srv.Serve(ln)
	if err := l.svc.Start(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// drain waits until no image job or video task is unfinished, at most for wait; it returns how many
// are still unfinished.
func (l *local) drain(ctx context.Context, wait time.Duration) int64 {
	deadline := time.Now().Add(wait)
	for {
		var jobsLeft, videosLeft int64
		l.svc.DB.WithContext(ctx).Model(&models.Job{}).Where("status = ?", models.JobPending).Count(&jobsLeft)
		l.svc.DB.WithContext(ctx).Model(&models.VideoTask{}).Where("status IN ?", []string{"pending", "running"}).Count(&videosLeft)
		if left := jobsLeft + videosLeft; left == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// statusCounts returns "status n, status n" of a table's rows.
func (l *local) statusCounts(ctx context.Context, table string) string {
	var rows []struct {
		Status string
		N      int64
	}
	l.svc.DB.WithContext(ctx).Table(table).Select("status, COUNT(*) AS n").Group("status").Order("status").Scan(&rows)
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("%s %d", r.Status, r.N))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// stop stops serving and stops the workers (running work ends or stays queued).
func (l *local) stop(ctx context.Context) error {
	if l.stopped {
		return nil
	}
	l.stopped = true
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
	return l.svc.Stop(ctx)
}

// close stops everything and removes the database and the files.
func (l *local) close() {
	if l.svc != nil {
		_ = l.stop(context.Background())
		l.svc.Close()
	}
	if l.fake != nil {
		l.fake.Close()
	}
	l.dropDB()
	if l.dir != "" && keepData {
		fmt.Fprintln(os.Stderr, "data kept in", l.dir)
	} else if l.dir != "" {
		os.RemoveAll(l.dir)
	}
}

// keepData leaves the media directory in place after the run.
var keepData bool

const keepDataHelp = "keep the data directory (media, SQLite file) instead of deleting it: on ext4 without a journal, " +
	"thousands of files deleted slow file creation for the next few minutes, and with it the next run"

// createTenant creates a metered tenant with plenty of credits through POST /api/admin and returns its key.
func createTenant(ctx context.Context, base, adminKey string) (string, error) {
	return benchapi.CreateTenant(ctx, base, adminKey, "Load", 100_000_000)
}

// selfRSS returns the resident memory of this process in bytes (VmRSS).
func selfRSS(context.Context) (float64, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}

// metricsRSS returns a function that reads process_resident_memory_bytes from a server's /metrics.
func metricsRSS(metricsURL, adminKey string) func(context.Context) (float64, error) {
	return func(ctx context.Context) (float64, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", metricsURL, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-API-Key", adminKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s answered %d", metricsURL, res.StatusCode)
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "process_resident_memory_bytes "); ok {
				return strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		return 0, fmt.Errorf("%s has no process_resident_memory_bytes", metricsURL)
	}
}

// sampleRSS reads the resident memory every interval until ctx ends; the channel receives the peak
// (0 when no reading succeeded).
func sampleRSS(ctx context.Context, read func(context.Context) (float64, error), every time.Duration) <-chan float64 {
	out := make(chan float64, 1)
	go func() {
		peak := 0.0
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v, err := read(ctx); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-ctx.Done():
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// auditDB audits the credits ledger of an external studio's database. The audit reads balances and
// ledger sums in two statements, so that money moving in between (a job refunded just then) can show
// as a discrepancy: a discrepancy is checked again, up to three times.
func auditDB(ctx context.Context, dbURL string) ([]string, error) {
	db, err := models.OpenDB(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	app, err := models.NewApp(ctx, db, models.Config{Secret: "audit only"}, models.Deps{})
	if err != nil {
		return nil, err
	}
	var problems []string
	for range 3 {
		if problems, err = app.Credits().AuditLedger(ctx); err != nil || len(problems) == 0 {
			return problems, err
		}
		time.Sleep(2 * time.Second)
	}
	return problems, nil
}
