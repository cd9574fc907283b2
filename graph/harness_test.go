package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"studio/cmd/server"
	"studio/jobs"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

func TestMain(m *testing.M) {
	// Access logs of every request drown the failures; warnings and errors still show.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	modelstest.ExtraMigrations = append(modelstest.ExtraMigrations, jobs.MigrateQueue)
	modelstest.Main(m)
}

// env is one studio replica over a database, reached over real HTTP and WebSocket.
type env struct {
	t        *testing.T
	srv      *httptest.Server
	svc      *server.Service
	app      *models.App
	adminKey string
}

// envConfig is what an envOption may adjust before the replica starts.
type envConfig struct {
	dbURL    string
	adminKey string
	workers  bool
	opts     server.Options
	vars     map[string]string // settings (environment variables) beyond the harness's own
}

// envOption adjusts the configuration of a replica.
type envOption func(c *envConfig)

// onDatabase runs the replica on an existing database with the given administrator key (several replicas).
func onDatabase(dbURL, adminKey string) envOption {
	return func(c *envConfig) { c.dbURL, c.adminKey = dbURL, adminKey }
}

// setting sets a configuration variable of the replica.
func setting(name, value string) envOption {
	return func(c *envConfig) {
		if c.vars == nil {
			c.vars = map[string]string{}
		}
		c.vars[name] = value
	}
}

// withoutWorkers starts only the HTTP surfaces and the event broker, no queue workers.
func withoutWorkers(c *envConfig) { c.workers = false }

// newEnv starts a replica: on a fresh database unless onDatabase says otherwise.
func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	ec := &envConfig{adminKey: models.NewAPIKey(), workers: true, opts: server.Options{Jobs: jobs.Options{
		CallbackBackoff: []time.Duration{200 * time.Millisecond},
		PollInterval:    50 * time.Millisecond, RetryBase: 10 * time.Millisecond, SweepInterval: time.Second, VideoPoll: 100 * time.Millisecond,
	}}}
	for _, o := range opts {
		o(ec)
	}
	if ec.dbURL == "" {
		ec.dbURL = modelstest.URLFor(t)
	}
	srv := httptest.NewUnstartedServer(nil)
	vars := map[string]string{
		"SERVICE_ADDR":               srv.Listener.Addr().String(),
		"SERVICE_DATA_DIR":           t.TempDir(),
		"SERVICE_ADMIN_KEY":          ec.adminKey,
		"SERVICE_ALLOW_PRIVATE_URLS": "true",
		"DATABASE_URL":               ec.dbURL,
	}
	for k, v := range ec.vars {
		vars[k] = v
	}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { val, ok := vars[v.Env]; return val, ok })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ctx := context.Background()
	svc, err := server.Open(ctx, cfg, ec.opts)
	if err != nil {
		t.Fatalf("service: %v", err)
	}
	srv.Config.Handler = svc.Handler(ec.opts)
	srv.Start()
	if ec.workers {
		err = svc.Start(ctx)
	} else {
		err = svc.Events.Start(ctx)
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		_ = svc.Stop(context.Background())
		svc.Close()
	})
	return &env{t: t, srv: srv, svc: svc, app: svc.App, adminKey: ec.adminKey}
}

// fakeUpstreams configures two image channels of family gen2 on the fake OpenAI-compatible server, behind
// a proxy that holds every upstream request for delay, so that each state of a job lasts long enough to
// be seen. With fail set, the first image request fails (whichever channel routing picks): the job
// switches to its backup channel, records the progress note, and then finishes.
func fakeUpstreams(t *testing.T, delay time.Duration, fail bool) (*fakeupstream.Server, envOption) {
	t.Helper()
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	if fail {
		fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.ServerError, Times: 1})
	}
	target, _ := url.Parse(fake.ChannelURL("x"))
	target.Path = ""
	proxy := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	ch := func(name string) upstream.Config {
		return upstream.Config{Name: name, Provider: "prov-" + name, Media: upstream.MediaImage, Family: "gen2",
			Protocol: upstream.ProtocolOpenAI, BaseURL: slow.URL + "/c/" + name + "/v1", APIKey: "test", Model: "model-" + name,
			Capabilities: []upstream.Capability{upstream.CapReferenceImages, upstream.CapQuality},
			SoftTimeout:  5 * time.Second, CostUSD: 0.04, Rating: 0.5}
	}
	cfgs := []upstream.Config{ch("img-a"), ch("img-b")}
	return fake, func(c *envConfig) { c.opts.Upstreams = cfgs }
}

// upstreams is fakeUpstreams for tests that do not touch the fake server.
func upstreams(t *testing.T, delay time.Duration, fail bool) envOption {
	_, opt := fakeUpstreams(t, delay, fail)
	return opt
}

// admin runs an administrator action over REST and fails the test unless it answers 200.
func (e *env) admin(body map[string]any) map[string]any {
	e.t.Helper()
	status, out := e.rest("POST", "/api/admin", e.adminKey, body)
	if status != 200 {
		e.t.Fatalf("admin %v: %d %v", body["action"], status, out)
	}
	return out
}

// tenant creates a tenant with credits and returns its id and key.
func (e *env) tenant(name string, credits int) (id, key string) {
	e.t.Helper()
	r := e.admin(map[string]any{"action": "tenant-create", "name": name, "credits": credits})
	return r["tenant"].(map[string]any)["id"].(string), r["api_key"].(string)
}

// member creates a member account of the tenant and returns its key.
func (e *env) member(tenantKey, email string) string {
	e.t.Helper()
	status, out := e.rest("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "create", "email": email, "nickname": "m", "shared": true})
	if status != 200 {
		e.t.Fatalf("create member: %d %v", status, out)
	}
	return out["account"].(map[string]any)["api_key"].(string)
}

// rest calls a REST endpoint with X-API-Key and returns the status and the decoded body.
func (e *env) rest(method, path, key string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// gqlResult is a decoded GraphQL answer.
type gqlResult struct {
	Status int
	Data   map[string]any
	Errors []gqlError
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// code returns the extension code of the first error, "" when there is none.
func (r *gqlResult) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// gql posts a GraphQL operation with the key in X-API-Key.
func (e *env) gql(key, query string, vars map[string]any) *gqlResult {
	e.t.Helper()
	return e.gqlAt(e.srv.URL+"/graphql", map[string]string{"X-API-Key": key}, query, vars)
}

// gqlAt posts a GraphQL operation to url with headers.
func (e *env) gqlAt(url string, headers map[string]string, query string, vars map[string]any) *gqlResult {
	e.t.Helper()
	raw, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST /graphql: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	out := &gqlResult{Status: res.StatusCode}
	var doc struct {
		Data   map[string]any `json:"data"`
		Errors []gqlError     `json:"errors"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		e.t.Fatalf("POST /graphql: %d %s", res.StatusCode, body)
	}
	out.Data, out.Errors = doc.Data, doc.Errors
	for _, ge := range out.Errors {
		if ge.Extensions["code"] == "INTERNAL" {
			e.t.Errorf("internal error: %s at %v", ge.Message, ge.Path)
		}
	}
	return out
}

// must fails the test when the answer has errors, and returns its data.
func (r *gqlResult) must(t *testing.T) map[string]any {
	t.Helper()
	if len(r.Errors) > 0 {
		t.Fatalf("GraphQL errors: %+v", r.Errors)
	}
	return r.Data
}

// The WebSocket subprotocols.
const (
	transportWS = "graphql-transport-ws"
	legacyWS    = "graphql-ws"
)

// wsMsg is one protocol message.
type wsMsg struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// wsClient is a GraphQL WebSocket client over gorilla/websocket that answers pings itself.
type wsClient struct {
	t     *testing.T
	conn  *websocket.Conn
	proto string
	msgs  chan wsMsg
	wmu   sync.Mutex

	done      chan struct{}
	closeCode int
	closeText string
	keepAlive atomic.Int32 // "ka" messages received
}

// dial opens a WebSocket to base's /graphql with a subprotocol and optional headers.
func dial(t *testing.T, base, proto string, header http.Header) *wsClient {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + "/graphql"
	d := websocket.Dialer{Subprotocols: []string{proto}, HandshakeTimeout: 5 * time.Second}
	conn, res, err := d.Dial(u, header)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, res)
	}
	if conn.Subprotocol() != proto {
		t.Fatalf("negotiated %q, want %q", conn.Subprotocol(), proto)
	}
	c := &wsClient{t: t, conn: conn, proto: proto, msgs: make(chan wsMsg, 256), done: make(chan struct{})}
	t.Cleanup(func() { _ = conn.Close() })
	go c.read()
	return c
}

func (c *wsClient) read() {
	defer close(c.done)
	for {
		var m wsMsg
		err := c.conn.ReadJSON(&m)
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				c.closeCode, c.closeText = ce.Code, ce.Text
			}
			return
		}
		switch m.Type {
		case "ping":
			c.send(wsMsg{Type: "pong"})
			continue
		case "ka":
			c.keepAlive.Add(1)
			continue
		case "pong":
			continue
		}
		c.msgs <- m
	}
}

func (c *wsClient) send(m wsMsg) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.WriteJSON(m)
}

// init sends connection_init with payload and returns the server's first answer.
func (c *wsClient) init(payload map[string]any) (wsMsg, bool) {
	c.t.Helper()
	raw, _ := json.Marshal(payload)
	if payload == nil {
		raw = nil
	}
	c.send(wsMsg{Type: "connection_init", Payload: raw})
	return c.next(5 * time.Second)
}

// mustInit initialises the connection and fails the test unless it is acknowledged.
func (c *wsClient) mustInit(payload map[string]any) {
	c.t.Helper()
	m, ok := c.init(payload)
	if !ok || m.Type != "connection_ack" {
		c.t.Fatalf("connection_init: got %+v (closed %d %q), want connection_ack", m, c.closeCode, c.closeText)
	}
}

// subscribe starts an operation under id.
func (c *wsClient) subscribe(id, query string, vars map[string]any) {
	typ := "subscribe"
	if c.proto == legacyWS {
		typ = "start"
	}
	raw, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	c.send(wsMsg{Type: typ, ID: id, Payload: raw})
}

// next returns the next message (not a keep-alive), false when the connection closed or timeout passed.
func (c *wsClient) next(timeout time.Duration) (wsMsg, bool) {
	select {
	case m := <-c.msgs:
		return m, true
	case <-c.done:
		select {
		case m := <-c.msgs:
			return m, true
		default:
			return wsMsg{}, false
		}
	case <-time.After(timeout):
		return wsMsg{}, false
	}
}

// waitClosed waits for the server to close the connection and returns its close code.
func (c *wsClient) waitClosed(timeout time.Duration) int {
	c.t.Helper()
	select {
	case <-c.done:
		return c.closeCode
	case <-time.After(timeout):
		c.t.Fatalf("connection still open after %s", timeout)
		return 0
	}
}

// isData reports whether m carries a result (next / data).
func isData(m wsMsg) bool { return m.Type == "next" || m.Type == "data" }

// collect reads the messages of subscription id until it completes; it fails the test on an error message
// or when the stream does not complete within timeout.
func (c *wsClient) collect(id string, timeout time.Duration) []map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var out []map[string]any
	for {
		m, ok := c.next(time.Until(deadline))
		if !ok {
			c.t.Fatalf("subscription %s did not complete in %s; got %d messages: %v", id, timeout, len(out), out)
		}
		if m.ID != id {
			continue
		}
		switch {
		case isData(m):
			var p struct {
				Data   map[string]any `json:"data"`
				Errors []gqlError     `json:"errors"`
			}
			_ = json.Unmarshal(m.Payload, &p)
			if len(p.Errors) > 0 {
				c.t.Fatalf("subscription %s: errors %+v", id, p.Errors)
			}
			out = append(out, p.Data)
		case m.Type == "complete":
			return out
		default:
			c.t.Fatalf("subscription %s: unexpected %s %s", id, m.Type, m.Payload)
		}
	}
}
