package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"studio/cmd/server"
	"studio/jobs"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/modelstest"
)

func TestMain(m *testing.M) {
	modelstest.ExtraMigrations = append(modelstest.ExtraMigrations, jobs.MigrateQueue)
	modelstest.Main(m)
}

// env is one in-process studio over a fresh database, reached over real HTTP, with a fake
// OpenAI-compatible upstream behind one image, one chat and one video channel.
type env struct {
	t        *testing.T
	srv      *httptest.Server
	svc      *server.Service
	app      *models.App
	adminKey string
	fake     *fakeupstream.Server
}

// newEnv starts a service; vars override configuration variables.
func newEnv(t *testing.T, vars ...string) *env {
	t.Helper()
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	db := modelstest.NewDB(t)
	srv := httptest.NewUnstartedServer(nil)
	adminKey := models.NewAPIKey()
	cfgVars := map[string]string{
		"SERVICE_ADDR":               srv.Listener.Addr().String(),
		"SERVICE_DATA_DIR":           t.TempDir(),
		"SERVICE_ADMIN_KEY":          adminKey,
		"SERVICE_ALLOW_PRIVATE_URLS": "true",
	}
	for i := 0; i+1 < len(vars); i += 2 {
		cfgVars[vars[i]] = vars[i+1]
	}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { val, ok := cfgVars[v.Env]; return val, ok })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.DatabaseURL = db.URL
	opts := server.Options{
		Jobs: jobs.Options{PollInterval: 50 * time.Millisecond, RetryBase: 10 * time.Millisecond, SweepInterval: time.Second, VideoPoll: 100 * time.Millisecond,
			CallbackBackoff: []time.Duration{200 * time.Millisecond}},
		Upstreams: []upstream.Config{{Name: "img-a", Provider: "prov-a", Media: upstream.MediaImage, Family: "gen2",
			Protocol: upstream.ProtocolOpenAI, BaseURL: fake.ChannelURL("img-a"), APIKey: "test", Model: "model-a",
			Capabilities: []upstream.Capability{upstream.CapReferenceImages, upstream.CapQuality},
			SoftTimeout:  10 * time.Second, CostUSD: 0.04, Rating: 0.5},
			{Name: "chat-a", Provider: "prov-c", Media: upstream.MediaChat, Family: "chat", Protocol: upstream.ProtocolOpenAI,
				BaseURL: fake.ChannelURL("chat-a"), APIKey: "test", Model: "chat-model", SoftTimeout: 10 * time.Second, CostUSD: 0.001, Rating: 0.5},
			{Name: "vid-a", Provider: "prov-v", Media: upstream.MediaVideo, Family: "vidA", Protocol: upstream.ProtocolOpenAI,
				BaseURL: fake.ChannelURL("vid-a"), APIKey: "test", SoftTimeout: 10 * time.Second, CostUSD: 0.05, Rating: 0.5,
				Tiers: []string{upstream.TierA20Pro, upstream.TierA20Fast, upstream.TierA20Mini, upstream.TierA25Pro}}},
		CLIGuide: map[string]any{"package": "studio", "command": "studio", "version": "test", "commands": []any{}},
	}
	svc, err := server.New(context.Background(), db, cfg, opts)
	if err != nil {
		t.Fatalf("service: %v", err)
	}
	srv.Config.Handler = svc.Handler(opts)
	srv.Start()
	if err := svc.Start(context.Background()); err != nil {
		t.Fatalf("start workers: %v", err)
	}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		_ = svc.Stop(context.Background())
	})
	return &env{t: t, srv: srv, svc: svc, app: svc.App, adminKey: adminKey, fake: fake}
}

// admin runs an administrator action through the core's dispatcher.
func (e *env) admin(body map[string]any) map[string]any {
	e.t.Helper()
	raw, _ := json.Marshal(body)
	out, err := e.app.Admin.Run(context.Background(), models.Operator(), raw)
	if err != nil {
		e.t.Fatalf("admin %v: %v", body["action"], err)
	}
	b, _ := json.Marshal(out)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// tenant creates a tenant with credits and returns its id and key.
func (e *env) tenant(name string, credits int) (id, key string) {
	e.t.Helper()
	m := e.admin(map[string]any{"action": "tenant-create", "name": name, "credits": credits})
	return m["tenant"].(map[string]any)["id"].(string), m["api_key"].(string)
}

// platformTemplate creates an active platform image template (as the administrator), with a real
// sample image in the local media store, and returns its id.
func (e *env) platformTemplate(name, slug string) string {
	e.t.Helper()
	samples := filepath.Join(e.app.Config.DataDir, "media", "samples")
	if err := os.MkdirAll(samples, 0o755); err != nil {
		e.t.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 96, 128))
	for y := range 128 {
		for x := range 96 {
			img.Set(x, y, color.RGBA{R: uint8(40 + x), G: uint8(90 + y/2), B: 200, A: 255})
		}
	}
	f, err := os.Create(filepath.Join(samples, slug+".png"))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		e.t.Fatal(err)
	}
	f.Close()
	in := models.TemplateInput{Type: models.TemplateImage, Slug: slug, ZhName: name, Ratio: "3:4",
		SampleImages:      []string{e.app.Config.CDNURL + "/samples/" + slug + ".png"},
		GenerationConfigs: json.RawMessage(`[{"model":"auto","prompt_template":"a portrait of {subject}","fields":[{"key":"subject","label":"主体"}]}]`)}
	v, err := e.app.Templates().CreateTemplate(context.Background(), &models.Identity{Kind: models.IdentityAdmin}, in)
	if err != nil {
		e.t.Fatalf("platform template: %v", err)
	}
	return v.ID
}

// api calls the REST surface with a credential and decodes the JSON answer.
func (e *env) api(method, path, key string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	req.Header.Set("X-API-Key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// browser is a plain HTTP client with its own cookie jar that does not follow redirects: a browser
// without JavaScript, for the handler tests.
type browser struct {
	e      *env
	client *http.Client
	extra  []string // headers sent with every request (name, value, ...)
}

// page is one answer of the console.
type page struct {
	Status   int
	Header   http.Header
	Body     string
	Location string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// do sends a request with optional headers.
func (b *browser) do(method, path string, form url.Values, headers ...string) *page {
	b.e.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.e.srv.URL+path, rd)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	headers = append(append([]string{}, b.extra...), headers...)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 500 {
		b.e.t.Errorf("%s %s: server error %d: %s", method, path, res.StatusCode, body)
	}
	return &page{Status: res.StatusCode, Header: res.Header, Body: string(body), Location: res.Header.Get("Location")}
}

// doBody sends a request with a raw body of the given type.
func (b *browser) doBody(method, path, contentType string, body []byte) *page {
	b.e.t.Helper()
	req, _ := http.NewRequest(method, b.e.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	res, err := b.client.Do(req)
	if err != nil {
		b.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 500 {
		b.e.t.Errorf("%s %s: server error %d: %s", method, path, res.StatusCode, out)
	}
	return &page{Status: res.StatusCode, Header: res.Header, Body: string(out), Location: res.Header.Get("Location")}
}

func (b *browser) get(path string) *page { b.e.t.Helper(); return b.do(http.MethodGet, path, nil) }

func (b *browser) post(path string, form url.Values) *page {
	b.e.t.Helper()
	return b.do(http.MethodPost, path, form)
}

// Every form carries its token in the one field "csrf" (web/forms.go); formTokenRE is the same pattern,
// kept for the pages without a session.
var (
	csrfRE      = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	formTokenRE = csrfRE
)

// csrf returns the session's form token, read from a signed-in page.
func (b *browser) csrf() string {
	b.e.t.Helper()
	p := b.get("/console/jobs")
	if p.Status != http.StatusOK {
		p = b.get("/admin")
	}
	m := csrfRE.FindStringSubmatch(p.Body)
	if m == nil {
		b.e.t.Fatalf("no CSRF token on the page (status %d)", p.Status)
	}
	return m[1]
}

// signIn signs in with a key (or login token) through the sign-in form and returns the redirect target.
func (b *browser) signIn(key string) string {
	b.e.t.Helper()
	p := b.get("/login")
	m := formTokenRE.FindStringSubmatch(p.Body)
	if m == nil {
		b.e.t.Fatalf("no form token on /login: %d", p.Status)
	}
	res := b.post("/login", url.Values{"csrf": {m[1]}, "method": {"key"}, "key": {key}})
	if res.Status != http.StatusSeeOther {
		b.e.t.Fatalf("sign in: status %d, want 303: %s", res.Status, excerpt(res.Body))
	}
	return res.Location
}

// excerpt shortens a body for failure messages.
func excerpt(s string) string {
	if len(s) > 800 {
		return s[:800] + "..."
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
