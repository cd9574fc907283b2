package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"studio/bench/internal/benchapi"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL, for reading the run's database
	_ "modernc.org/sqlite"             // SQLite, the pure Go driver studio uses

	"studio/jobs/upstream"
	"studio/models"
)

// buildStudio builds cmd/studio into dir and returns the binary's path.
func buildStudio(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "studio")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/studio")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/studio: %w", err)
	}
	return bin, nil
}

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// upstreamsFile writes the upstreams file of a run: one image upstream (with max_concurrency when
// maxConc > 0) or one video upstream serving every tier, both on the fake.
func upstreamsFile(path, base string, sc scenario) error {
	var b strings.Builder
	b.WriteString("upstreams:\n")
	if !sc.video {
		fmt.Fprintf(&b, "  - name: bench-image\n    provider: bench\n    media: image\n    family: bench\n    protocol: openai\n"+
			"    base_url: %s\n    api_key: bench\n    model: fake-image\n    soft_timeout: %s\n    cost_usd: 0.01\n    rating: 0.5\n",
			base, softTimeout(sc.latency))
		if sc.maxConcurrency > 0 {
			fmt.Fprintf(&b, "    max_concurrency: %d\n", sc.maxConcurrency)
		}
	} else {
		fmt.Fprintf(&b, "  - name: bench-video\n    provider: bench\n    media: video\n    protocol: openai\n"+
			"    base_url: %s\n    api_key: bench\n    model: fake-video\n    tiers: [%s]\n    soft_timeout: 60s\n    cost_usd: 0.05\n    rating: 0.5\n",
			base, strings.Join(upstream.TierCodes, ", "))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// softTimeout gives an upstream of latency l time to answer: twice l, at least a minute.
func softTimeout(l time.Duration) time.Duration { return max(time.Minute, 2*l) }

// studioProc is `studio serve` running in a process of its own.
type studioProc struct {
	cmd      *exec.Cmd
	base     string // http://127.0.0.1:port
	metrics  string // http://127.0.0.1:port/metrics (SERVICE_METRICS_ADDR: no credentials)
	adminKey string
	logPath  string
	exited   chan struct{}
	waitErr  error
}

// startStudio starts the binary with env (added to this process's environment, whose SERVICE_* and
// DATABASE_URL are left out) and waits until GET /api/ready answers 200. When the process ends before
// that, the error carries the end of its log.
func startStudio(ctx context.Context, bin, dir string, env map[string]string) (*studioProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	maddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env["SERVICE_ADDR"], env["SERVICE_METRICS_ADDR"] = addr, maddr
	p := &studioProc{base: "http://" + addr, metrics: "http://" + maddr + "/metrics", adminKey: env["SERVICE_ADMIN_KEY"],
		logPath: filepath.Join(dir, "studio.log"), exited: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, "serve")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SERVICE_") && !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "SSL_CERT_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("studio exited before it was ready (%v): %s", p.waitErr, p.logTail(1))
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("studio not ready after 2 minutes: %s", p.logTail(6))
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/api/ready", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logTail returns the last lines of studio's log, joined.
func (p *studioProc) logTail(lines int) string {
	b, _ := os.ReadFile(p.logPath)
	all := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, " | ")
}

// grepLog returns the lines of studio's log that contain s, at most n.
func (p *studioProc) grepLog(s string, n int) []string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && len(out) < n {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// stop ends the process: SIGTERM, then SIGKILL after 20 s.
func (p *studioProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		fmt.Println("studio did not stop 20 s after SIGTERM: killed")
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// createTenant creates a metered tenant with plenty of credits through POST /api/admin and returns its key.
func createTenant(ctx context.Context, base, adminKey string) (string, error) {
	return benchapi.CreateTenant(ctx, base, adminKey, "Inflight", 1_000_000_000)
}

// snippet shortens an answer for an error message.
func snippet(b []byte) string { return benchapi.Snippet(b, 200) }

// runDB reads the run's database directly (studio's tables), beside studio.
type runDB struct {
	db      *sql.DB
	dialect string // sqlite or postgres
	name    string // PostgreSQL: the database's name
}

// benchAppName marks the bench's own PostgreSQL connections, which the connection count leaves out.
const benchAppName = "bench-inflight"

// openRunDB opens the DATABASE_URL studio was given.
func openRunDB(dbURL string) (*runDB, error) {
	if path, ok := strings.CutPrefix(dbURL, "sqlite://"); ok {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		return &runDB{db: db, dialect: "sqlite"}, nil
	}
	u, err := url.Parse(models.PoolURL(dbURL))
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("application_name", benchAppName)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	return &runDB{db: db, dialect: "postgres", name: strings.TrimPrefix(u.Path, "/")}, nil
}

// open counts the jobs (or video tasks) not yet ended.
func (d *runDB) open(ctx context.Context, video bool) (int, error) {
	q := "SELECT count(*) FROM jobs WHERE status = 'pending'"
	if video {
		q = "SELECT count(*) FROM video_tasks WHERE status IN ('pending', 'running')"
	}
	var n int
	err := d.db.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// row is one job or video task as the database holds it at the end.
type row struct {
	status         string
	created        time.Time
	finished       time.Time // zero while not ended
	upstreamTaskID string    // video tasks
}

// rows reads every job (or video task) of the run by id.
func (d *runDB) rows(ctx context.Context, video bool) (map[string]row, error) {
	q := "SELECT id, status, created_at, finished_at, '' FROM jobs"
	if video {
		q = "SELECT id, status, created_at, finished_at, upstream_task_id FROM video_tasks"
	}
	rs, err := d.db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := map[string]row{}
	for rs.Next() {
		var id string
		var r row
		var created, finished any
		if err := rs.Scan(&id, &r.status, &created, &finished, &r.upstreamTaskID); err != nil {
			return nil, err
		}
		if r.created, err = asTime(created); err != nil {
			return nil, err
		}
		if r.finished, err = asTime(finished); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rs.Err()
}

// asTime reads a timestamp column: a time.Time, or SQLite's text forms; NULL is the zero time.
func asTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		return t, nil
	case []byte:
		return asTime(string(t))
	case string:
		for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", "2006-01-02T15:04:05.999999999-07:00",
			"2006-01-02 15:04:05.999999999Z07:00", time.RFC3339Nano, "2006-01-02 15:04:05.999999999"} {
			if p, err := time.Parse(layout, t); err == nil {
				return p, nil
			}
		}
		return time.Time{}, fmt.Errorf("timestamp %q: unknown layout", t)
	}
	return time.Time{}, fmt.Errorf("timestamp of type %T", v)
}

// connections counts studio's connections to the run's database in pg_stat_activity (the bench's own,
// marked by application_name, left out).
func (d *runDB) connections(ctx context.Context) (int, error) {
	var n int
	err := d.db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' "+
		"AND application_name <> $2", d.name, benchAppName).Scan(&n)
	return n, err
}

// auditLedger checks the credits ledger of the run's database (App.AuditLedger) once studio stopped.
func auditLedger(ctx context.Context, dbURL string) string {
	db, err := models.OpenDB(ctx, dbURL)
	if err != nil {
		return "not checked: " + err.Error()
	}
	defer db.Close()
	app, err := models.NewApp(ctx, db, models.Config{Secret: "audit only"}, models.Deps{})
	if err != nil {
		return "not checked: " + err.Error()
	}
	problems, err := app.Credits().AuditLedger(ctx)
	switch {
	case err != nil:
		return "not checked: " + err.Error()
	case len(problems) > 0:
		return fmt.Sprintf("NOT balanced (%d problems, e.g. %s)", len(problems), problems[0])
	}
	return "balanced"
}

// peaks is what the sampler saw of studio during a run. A figure that was never read is -1.
type peaks struct {
	rss, hwm      float64 // bytes: sampled VmRSS, and VmHWM at the end
	goroutines    float64
	fds           int
	busy          float64 // studio_queue_running
	busyFollowing float64 // studio_queue_running once every video task was started at the provider
	// startBuckets is studio_generation_start_seconds as last read: cumulative count by upper bound.
	startBuckets   map[float64]float64
	queueRunning   float64 // studio_queue_jobs{state="running"} (queue rows in state running)
	waiting        float64 // studio_generations_waiting
	poolOpen       float64 // sum over pools of studio_db_connections{state="open"}
	poolInUse      float64 // sum over pools of studio_db_connections{state="in_use"}
	poolByName     map[string]float64
	pgConns        int
	scrapes        []time.Duration
	scrapeFailures int
}

// sampler reads studio's /metrics, its /proc entries and (PostgreSQL) pg_stat_activity every interval.
type sampler struct {
	p     *studioProc
	db    *runDB
	every time.Duration
	// following is set once every video task was started at the provider: busyFollowing counts from then.
	following atomic.Bool
	client    *http.Client

	mu   sync.Mutex
	peak peaks
	stop context.CancelFunc
	done chan struct{}
}

func newSampler(p *studioProc, db *runDB, every time.Duration) *sampler {
	s := &sampler{p: p, db: db, every: every, client: &http.Client{Timeout: 5 * time.Second}, done: make(chan struct{})}
	s.peak = peaks{rss: -1, hwm: -1, goroutines: -1, fds: -1, busy: -1, busyFollowing: -1, queueRunning: -1, waiting: -1, poolOpen: -1, poolInUse: -1,
		poolByName: map[string]float64{}, pgConns: -1}
	return s
}

func (s *sampler) start(ctx context.Context) {
	ctx, s.stop = context.WithCancel(ctx)
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			s.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// finish stops sampling and returns the peaks.
func (s *sampler) finish() peaks {
	s.stop()
	<-s.done
	s.sample(context.Background())
	if st, err := procStatus(s.p.cmd.Process.Pid); err == nil {
		s.mu.Lock()
		s.peak.hwm = st["VmHWM"]
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

func (s *sampler) sample(ctx context.Context) {
	pid := s.p.cmd.Process.Pid
	if st, err := procStatus(pid); err == nil {
		s.mu.Lock()
		s.peak.rss = max(s.peak.rss, st["VmRSS"])
		s.mu.Unlock()
	}
	if d, err := os.Open(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		s.mu.Lock()
		s.peak.fds = max(s.peak.fds, len(names))
		s.mu.Unlock()
	}
	if s.db.dialect == "postgres" {
		if n, err := s.db.connections(ctx); err == nil {
			s.mu.Lock()
			s.peak.pgConns = max(s.peak.pgConns, n)
			s.mu.Unlock()
		}
	}
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.p.metrics, nil)
	res, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			s.mu.Lock()
			s.peak.scrapeFailures++
			s.mu.Unlock()
		}
		return
	}
	defer res.Body.Close()
	var poolOpen, poolInUse float64
	var havePool bool
	byName := map[string]float64{}
	set := func(p *float64, v float64) { *p = max(*p, v) }
	s.mu.Lock()
	defer s.mu.Unlock()
	err = parseMetrics(res.Body, func(name, labels string, v float64) {
		switch name {
		case "process_resident_memory_bytes":
			set(&s.peak.rss, v)
		case "go_goroutines":
			set(&s.peak.goroutines, v)
		case "studio_queue_running":
			set(&s.peak.busy, v)
			if s.following.Load() {
				set(&s.peak.busyFollowing, v)
			}
		case "studio_generations_waiting":
			set(&s.peak.waiting, v)
		case "studio_generation_start_seconds_bucket":
			if le, err := strconv.ParseFloat(label(labels, "le"), 64); err == nil {
				if s.peak.startBuckets == nil {
					s.peak.startBuckets = map[float64]float64{}
				}
				s.peak.startBuckets[le] = v
			}
		case "studio_queue_jobs":
			if label(labels, "state") == "running" {
				set(&s.peak.queueRunning, v)
			}
		case "studio_db_connections":
			havePool = true
			switch label(labels, "state") {
			case "open":
				poolOpen += v
				byName[label(labels, "pool")] += v
			case "in_use":
				poolInUse += v
			}
		}
	})
	if err != nil || res.StatusCode != http.StatusOK {
		s.peak.scrapeFailures++
		return
	}
	s.peak.scrapes = append(s.peak.scrapes, time.Since(start))
	if havePool {
		set(&s.peak.poolOpen, poolOpen)
		set(&s.peak.poolInUse, poolInUse)
		for k, v := range byName {
			s.peak.poolByName[k] = max(s.peak.poolByName[k], v)
		}
	}
}

// parseMetrics calls fn for every sample of a Prometheus text exposition.
func parseMetrics(r io.Reader, fn func(name, labels string, v float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name, labels := line[:sp], ""
		if b := strings.IndexByte(name, '{'); b >= 0 {
			name, labels = name[:b], name[b:]
		}
		fn(name, labels, v)
	}
	return sc.Err()
}

// label returns the value of one label in a {a="x",b="y"} set.
func label(labels, key string) string {
	at := strings.Index(labels, key+`="`)
	if at < 0 {
		return ""
	}
	rest := labels[at+len(key)+2:]
	end := strings.IndexByte(rest, '"')
	if end < 0 {
		return ""
	}
	return rest[:end]
}

// procStatus reads the kB figures of /proc/pid/status, in bytes.
func procStatus(pid int) (map[string]float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasSuffix(v, "kB") {
			continue
		}
		if kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 64); err == nil {
			out[k] = kb * 1024
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no figures in /proc status")
	}
	return out, nil
}
