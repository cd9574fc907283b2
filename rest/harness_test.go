package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"studio/cmd/server"
	"studio/jobs"
	"studio/models"
	"studio/models/modelstest"
	"studio/rest"
)

func TestMain(m *testing.M) {
	modelstest.ExtraMigrations = append(modelstest.ExtraMigrations, jobs.MigrateQueue)
	modelstest.Main(m)
}

// env is one in-process studio over a fresh database, reached over real HTTP.
type env struct {
	t        *testing.T
	srv      *httptest.Server
	svc      *server.Service
	app      *models.App
	adminKey string
	router   routers.Router
	// skipSpec turns off OpenAPI validation of responses for one call (for deliberately odd requests).
	skipSpec bool
}

// envConfig is what an envOption may adjust before the service starts.
type envConfig struct {
	vars map[string]string
	opts server.Options
}

// envOption adjusts the configuration before the service starts.
type envOption func(c *envConfig)

// withVar sets one configuration variable.
func withVar(name, value string) envOption { return func(c *envConfig) { c.vars[name] = value } }

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	db := modelstest.NewDB(t)
	srv := httptest.NewUnstartedServer(nil)
	adminKey := models.NewAPIKey()
	vars := map[string]string{
		"SERVICE_ADDR":               srv.Listener.Addr().String(),
		"SERVICE_DATA_DIR":           t.TempDir(),
		"SERVICE_ADMIN_KEY":          adminKey,
		"SERVICE_ALLOW_PRIVATE_URLS": "true",
	}
	ec := &envConfig{vars: vars, opts: server.Options{Jobs: jobs.Options{
		CallbackBackoff: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond},
		PollInterval:    50 * time.Millisecond, RetryBase: 10 * time.Millisecond, SweepInterval: time.Second, VideoPoll: 100 * time.Millisecond,
		CallbackTimeout: 500 * time.Millisecond,
	}}}
	for _, o := range opts {
		o(ec)
	}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { val, ok := vars[v.Env]; return val, ok })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.DatabaseURL = db.URL
	svc, err := server.New(context.Background(), db, cfg, ec.opts)
	if err != nil {
		t.Fatalf("service: %v", err)
	}
	ec.opts.CLIGuide = map[string]any{"package": "studio", "command": "studio", "version": "test", "commands": []any{}}
	srv.Config.Handler = svc.Handler(ec.opts)
	srv.Start()
	if err := svc.Start(context.Background()); err != nil {
		t.Fatalf("start workers: %v", err)
	}
	t.Cleanup(func() {
		srv.Close()
		_ = svc.Stop(context.Background())
	})
	return &env{t: t, srv: srv, svc: svc, app: svc.App, adminKey: adminKey, router: specRouter(t, srv.URL)}
}

func specRouter(t *testing.T, base string) routers.Router {
	t.Helper()
	doc, err := rest.OpenAPI()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	clone := *doc
	clone.Servers = openapi3.Servers{{URL: base}}
	r, err := gorillamux.NewRouter(&clone)
	if err != nil {
		t.Fatalf("openapi router: %v", err)
	}
	return r
}

// resp is a decoded HTTP answer.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

// str returns a top-level string field.
func (r *resp) str(k string) string { s, _ := r.JSON[k].(string); return s }

// num returns a top-level number field.
func (r *resp) num(k string) float64 { f, _ := r.JSON[k].(float64); return f }

// call sends a request with a credential (X-API-Key) and a body (string sent raw, anything else JSON-encoded).
func (e *env) call(method, path, key string, body any) *resp {
	e.t.Helper()
	return e.callH(method, path, map[string]string{"X-API-Key": key}, body)
}

// callH sends a request with explicit headers.
func (e *env) callH(method, path string, headers map[string]string, body any) *resp {
	e.t.Helper()
	var rd io.Reader
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		raw, _ = json.Marshal(b)
	}
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatalf("request: %v", err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out := &resp{Status: res.StatusCode, Header: res.Header}
	out.Body, _ = io.ReadAll(res.Body)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(out.Body, &out.JSON)
	}
	if out.Status >= 500 && out.Status != http.StatusServiceUnavailable {
		e.t.Errorf("%s %s: server error %d: %s", method, path, out.Status, out.Body)
	}
	if out.Status >= 400 && out.JSON != nil && !openAIStyle(req.URL.Path) {
		if code, _ := out.JSON["code"].(string); code == "" {
			e.t.Errorf("%s %s -> %d: error body without a code: %s", method, path, out.Status, out.Body)
		}
	}
	if !e.skipSpec {
		e.validate(req, raw, out)
	}
	return out
}

// openAIStyle reports whether path is one of the OpenAI-style paths, whose errors have OpenAI's shape.
func openAIStyle(path string) bool {
	return path == "/api/chat/completions" || path == "/api/models" || strings.HasPrefix(path, "/api/models/")
}

// validate checks a real response against the OpenAPI document; an undocumented route is a failure.
func (e *env) validate(req *http.Request, body []byte, out *resp) {
	e.t.Helper()
	if out.Status == http.StatusNotFound && out.JSON != nil && strings.HasPrefix(out.str("error"), "no such endpoint") {
		return
	}
	if out.Status == http.StatusMethodNotAllowed {
		return
	}
	vreq := req.Clone(context.Background())
	if body != nil {
		vreq.Body = io.NopCloser(bytes.NewReader(body))
	}
	route, params, err := e.router.FindRoute(vreq)
	if err != nil {
		e.t.Errorf("%s %s is not in rest/openapi.yaml: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true, ExcludeRequestQueryParams: true}}
	rv := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: out.Status, Header: out.Header,
		Body: io.NopCloser(bytes.NewReader(out.Body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), rv); err != nil {
		e.t.Errorf("%s %s -> %d does not match rest/openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, out.Status, err, truncate(out.Body))
	}
}

func truncate(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// admin runs an administrator action and fails the test unless it answers 200.
func (e *env) admin(body map[string]any) *resp {
	e.t.Helper()
	r := e.call("POST", "/api/admin", e.adminKey, body)
	if r.Status != 200 {
		e.t.Fatalf("admin %v: %d %s", body["action"], r.Status, r.Body)
	}
	return r
}

// tenant creates a tenant with credits and returns its id and key.
func (e *env) tenant(name string, credits int) (id, key string) {
	e.t.Helper()
	r := e.admin(map[string]any{"action": "tenant-create", "name": name, "credits": credits})
	return r.JSON["tenant"].(map[string]any)["id"].(string), r.str("api_key")
}

// expect fails the test unless the response has the status.
func (r *resp) expect(t *testing.T, status int) *resp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}
