package rest_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"studio/cmd/server"
	"studio/jobs"
	"studio/models"
	"studio/models/modelstest"
)

// tcpProxy forwards connections to a target and can drop every connection and refuse new ones, as a
// database restart looks to its clients.
type tcpProxy struct {
	ln     net.Listener
	target string
	down   atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.drop() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.down.Load() {
				c.Close()
				continue
			}
			go p.pipe(c)
		}
	}()
	return p
}

func (p *tcpProxy) pipe(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); u.Close(); c.Close() }()
	_, _ = io.Copy(c, u)
	u.Close()
	c.Close()
}

func (p *tcpProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// TestDatabaseRestartUnderLoad cuts the database away while requests flow: requests fail cleanly with
// 503 (never 500) and the service recovers by itself when the database is back.
func TestDatabaseRestartUnderLoad(t *testing.T) {
	modelstest.RequirePostgres(t)
	dbURL := modelstest.URLFor(t)
	u, _ := url.Parse(dbURL)
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()

	_, fake := fakeUpstreams(t)
	ec := &envConfig{opts: server.Options{Jobs: jobs.Options{PollInterval: 50 * time.Millisecond, RetryBase: 10 * time.Millisecond, SweepInterval: time.Second}}}
	fake(ec)
	srv := httptest.NewUnstartedServer(nil)
	adminKey := models.NewAPIKey()
	vars := map[string]string{"SERVICE_ADDR": srv.Listener.Addr().String(), "SERVICE_DATA_DIR": t.TempDir(), "SERVICE_ADMIN_KEY": adminKey,
		"SERVICE_ALLOW_PRIVATE_URLS": "true", "DATABASE_URL": u.String(), "SERVICE_JOB_DEADLINE": "20s", "SERVICE_GENERATE_RATE": "100000"}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { s, ok := vars[v.Env]; return s, ok })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc, err := server.Open(ctx, cfg, ec.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	srv.Config.Handler = svc.Handler(ec.opts)
	srv.Start()
	defer srv.Close()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Stop(context.Background())
	e := &env{t: t, srv: srv, svc: svc, app: svc.App, adminKey: adminKey, router: specRouter(t, srv.URL), skipSpec: true}
	_, key := e.tenant("Acme", 1000)

	var mu sync.Mutex
	statuses := map[int]int{}
	var jobIDs []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "load"})
				mu.Lock()
				statuses[r.Status]++
				if r.Status == 200 {
					jobIDs = append(jobIDs, r.str("jobId"))
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	proxy.down.Store(true)
	proxy.drop()
	time.Sleep(3 * time.Second)
	if h := e.call("GET", "/api/health", "", nil); h.Status != 503 {
		t.Errorf("health while the database is down = %d, want 503", h.Status)
	}
	proxy.down.Store(false)
	recovered := false
	for i := 0; i < 100 && !recovered; i++ {
		recovered = e.call("GET", "/api/health", "", nil).Status == 200
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if !recovered {
		t.Fatal("the service did not recover after the database came back")
	}
	r := e.call("POST", "/api/generate", key, map[string]any{"prompt": "after"}).expect(t, 200)
	jobIDs = append(jobIDs, r.str("jobId"))
	t.Logf("statuses during the outage: %v", statuses)
	if statuses[500] > 0 {
		t.Errorf("%d requests answered 500 during the outage; want clean 503s", statuses[500])
	}
	if statuses[503] == 0 {
		t.Errorf("no request saw 503 during a 3 s outage: %v", statuses)
	}
	// Every job ends (done, or failed and refunded) by its 20 s deadline plus the sweep's grace.
	end := time.Now().Add(40 * time.Second)
	for _, id := range jobIDs {
		for {
			j, err := svc.App.Jobs().Job(ctx, id)
			if err == nil && j.Status != models.JobPending {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("job %s still pending after its deadline", id)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	problems, err := svc.App.Credits().AuditLedger(ctx)
	if err != nil || len(problems) > 0 {
		t.Fatalf("ledger after the outage: %v %v", problems, err)
	}
	_ = strings.TrimSpace
	_ = http.StatusOK
}
