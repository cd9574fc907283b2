package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"studio/cmd/server"
	"studio/jobs"
	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
	"studio/models/media"
	"studio/models/media/s3test"
	"studio/models/modelstest"
)

// testServer is a studio server in-process, reached over real HTTP by the client commands.
type testServer struct {
	t        *testing.T
	srv      *httptest.Server
	app      *models.App
	adminKey string
	// putURL, when set, replaces the upload URL of every direct presign answer (to make the PUT fail).
	putURL atomic.Pointer[string]
}

// startServer starts a server with the configuration variables vars, and the upstreams ups (none: the built-in ones).
func startServer(t *testing.T, vars map[string]string, ups ...upstream.Config) *testServer {
	t.Helper()
	db := modelstest.NewDB(t)
	srv := httptest.NewUnstartedServer(nil)
	ts := &testServer{t: t, srv: srv, adminKey: models.NewAPIKey()}
	all := map[string]string{"SERVICE_ADDR": srv.Listener.Addr().String(), "SERVICE_DATA_DIR": t.TempDir(),
		"SERVICE_ADMIN_KEY": ts.adminKey, "SERVICE_ALLOW_PRIVATE_URLS": "true"}
	for k, v := range vars {
		all[k] = v
	}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { val, ok := all[v.Env]; return val, ok })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL = db.URL
	opts := server.Options{CLIGuide: cliGuide(newRootCmd()), Jobs: jobs.Options{PollInterval: 50 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, SweepInterval: time.Second, VideoPoll: 100 * time.Millisecond}, Upstreams: ups}
	svc, err := server.New(context.Background(), db, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts.app = svc.App
	h := svc.Handler(opts)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := ts.putURL.Load(); u != nil && r.URL.Path == "/api/upload-ref/presign" {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var m map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &m)
			if up, ok := m["upload"].(map[string]any); ok {
				up["url"] = *u
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rec.Code)
			_ = json.NewEncoder(w).Encode(m)
			return
		}
		h.ServeHTTP(w, r)
	})
	srv.Start()
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		_ = svc.Stop(context.Background())
	})
	return ts
}

// admin runs an administrator action over HTTP.
func (ts *testServer) admin(body map[string]any) map[string]any {
	ts.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", ts.srv.URL+"/api/admin", bytes.NewReader(b))
	req.Header.Set("X-API-Key", ts.adminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode != 200 {
		ts.t.Fatalf("admin %v: %d %v", body["action"], res.StatusCode, out)
	}
	return out
}

// tenantKey creates a tenant with credits and returns its key.
func (ts *testServer) tenantKey(credits int) string {
	ts.t.Helper()
	return ts.admin(map[string]any{"action": "tenant-create", "name": "Acme", "credits": credits})["api_key"].(string)
}

// user creates a personal account with a password, directly in the database.
func (ts *testServer) user(email, password string, credits int64) {
	ts.t.Helper()
	h, _ := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err := ts.app.DB.Gorm.Create(&models.User{ID: models.NewID(), Email: email, Nickname: "Me", PasswordHash: string(h), Credits: credits}).Error; err != nil {
		ts.t.Fatal(err)
	}
}

// syncBuffer is a buffer written by a running command and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cliResult is what one client command did.
type cliResult struct {
	out, err string
	code     int
}

// clientEnv points the client commands at the server, with a configuration directory of the test's own.
func clientEnv(t *testing.T, base, apiKey string) {
	t.Setenv("SERVICE_BASE_URL", base)
	t.Setenv("SERVICE_API_KEY", apiKey)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
}

// run runs `studio args...` in-process with the current environment.
func run(args ...string) cliResult {
	var out, errw syncBuffer
	return runWith(&out, &errw, args...)
}

func runWith(out, errw *syncBuffer, args ...string) cliResult {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errw)
	err := root.ExecuteContext(context.Background())
	r := cliResult{out: out.String(), err: errw.String()}
	if err != nil {
		r.code = exitCode(err)
		r.err += "studio: " + err.Error() + "\n"
	}
	return r
}

func (r cliResult) expect(t *testing.T, code int) cliResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.out, r.err)
	}
	return r
}

// json decodes the command's standard output.
func (r cliResult) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.out), &m); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.out)
	}
	return m
}

func TestCLIGuideListsExactlyTheClientCommands(t *testing.T) {
	ts := startServer(t, nil)
	res, err := http.Get(ts.srv.URL + "/api/cli-guide")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var g Guide
	if err := json.NewDecoder(res.Body).Decode(&g); err != nil {
		t.Fatal(err)
	}
	names := func(cs []GuideCommand) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	want := []string{"balance", "copy", "generate", "jobs", "login", "logout", "templates", "upload", "video", "whoami"}
	if got := names(g.Commands); !slices.Equal(got, want) {
		t.Fatalf("commands = %v, want %v", got, want)
	}
	if got := names(g.ServerCommands); !slices.Equal(got, []string{"admin", "serve"}) {
		t.Fatalf("server_commands = %v", got)
	}
	if g.Command != "studio" || g.Package == "" || len(g.ExitCodes) != 7 {
		t.Fatalf("guide = %+v", g)
	}
	for _, c := range g.Commands {
		i := slices.IndexFunc(c.Flags, func(f GuideFlag) bool { return f.Name == "--json" })
		if i < 0 {
			t.Errorf("%s has no --json", c.Name)
		}
		if c.Name == "generate" {
			for _, f := range []string{"--prompt", "--template", "--input", "--ratio", "--quality", "--background", "--resolution", "--reference", "--no-wait", "--output"} {
				if !slices.ContainsFunc(c.Flags, func(g GuideFlag) bool { return g.Name == f }) {
					t.Errorf("generate lacks %s", f)
				}
			}
		}
	}
}

var userCodeRE = regexp.MustCompile(`\b[A-Z]{4}-[A-Z]{4}\b`)

// approve signs in on the /device page with e-mail and password and approves the code, as a person would.
func approve(t *testing.T, base, userCode, email, password string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar}
	req, _ := http.NewRequest("GET", base+"/device?user_code="+url.QueryEscape(userCode), nil)
	req.Header.Set("Accept-Language", "en") // the page speaks the browser's language (Chinese by default)
	res, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if res.StatusCode != 200 || m == nil {
		t.Fatalf("GET /device = %d\n%s", res.StatusCode, page)
	}
	form := url.Values{"csrf": {string(m[1])}, "user_code": {userCode}, "email": {email}, "password": {password}, "action": {"approve"}}
	req, _ = http.NewRequest("POST", base+"/device", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept-Language", "en")
	res, err = b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Contains(page, []byte("Device approved")) {
		t.Fatalf("POST /device = %d\n%s", res.StatusCode, page)
	}
}

func TestLoginByDeviceAuthorization(t *testing.T) {
	ts := startServer(t, nil)
	ts.user("me@example.com", "my password", 7)
	clientEnv(t, ts.srv.URL, "")

	run("whoami").expect(t, exitAuth)
	var out, errw syncBuffer
	done := make(chan cliResult, 1)
	go func() { done <- runWith(&out, &errw, "login") }()
	var code string
	for deadline := time.Now().Add(10 * time.Second); code == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code = userCodeRE.FindString(errw.String())
	}
	if code == "" {
		t.Fatalf("login printed no code:\n%s", errw.String())
	}
	if !strings.Contains(errw.String(), ts.srv.URL+"/device?user_code="+code) {
		t.Fatalf("login printed no link:\n%s", errw.String())
	}
	approve(t, ts.srv.URL, code, "me@example.com", "my password")
	var r cliResult
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("login did not finish after approval:\n%s", errw.String())
	}
	r.expect(t, exitOK)
	if !strings.Contains(r.out, "Signed in to "+ts.srv.URL+" as me@example.com") || !strings.Contains(r.err, "Waiting for approval") {
		t.Fatalf("login output:\nstdout: %s\nstderr: %s", r.out, r.err)
	}
	path := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "studio", "credentials.json")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v, want mode 0600", fi, err)
	}
	var creds credentials
	b, _ := os.ReadFile(path)
	if json.Unmarshal(b, &creds) != nil || creds.BaseURL != ts.srv.URL || creds.Token == "" || creds.Email != "me@example.com" ||
		time.Until(creds.ExpiresAt) < models.LoginTTL-time.Hour {
		t.Fatalf("credentials = %s", b)
	}

	// The stored login is used by the other commands, also without SERVICE_BASE_URL.
	t.Setenv("SERVICE_BASE_URL", "")
	if w := run("whoami", "--json").expect(t, exitOK).json(t); w["email"] != "me@example.com" || w["credits"] != 7.0 {
		t.Fatalf("whoami = %v", w)
	}
	if r := run("whoami").expect(t, exitOK); !strings.Contains(r.out, "me@example.com") || !strings.Contains(r.out, "callback signing secret: whsec_") {
		t.Fatalf("whoami = %q, want the account and its callback signing secret", r.out)
	}
	if r := run("balance").expect(t, exitOK); strings.TrimSpace(r.out) != "7 credits" {
		t.Fatalf("balance = %q", r.out)
	}
	// SERVICE_API_KEY wins over the stored login.
	t.Setenv("SERVICE_API_KEY", ts.tenantKey(3))
	run("whoami").expect(t, exitAuth)
	if r := run("balance", "--json").expect(t, exitOK).json(t); r["credits"] != 3.0 || r["identity"] != "tenant" {
		t.Fatalf("balance with the key = %v", r)
	}
	t.Setenv("SERVICE_API_KEY", "")
	run("logout").expect(t, exitOK)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("logout left the credentials file")
	}
	run("whoami").expect(t, exitAuth)
}

func TestGenerateWaitsAndDownloads(t *testing.T) {
	ts := startServer(t, nil)
	key := ts.tenantKey(5)
	clientEnv(t, ts.srv.URL, key)
	dir := t.TempDir()
	out := filepath.Join(dir, "fox.png")
	r := run("generate", "--prompt", "a red fox", "--ratio", "1:1", "-o", out, "--json").expect(t, exitOK)
	job := r.json(t)
	if job["status"] != "done" || job["cdn_url"] == "" {
		t.Fatalf("job = %v", job)
	}
	img, err := os.ReadFile(out)
	if err != nil || len(img) < 100 {
		t.Fatalf("download: %v (%d bytes)", err, len(img))
	}
	if _, _, err := image.Decode(bytes.NewReader(img)); err != nil {
		t.Fatalf("downloaded file is not an image: %v", err)
	}
	id := job["jobId"].(string)
	if r := run("jobs").expect(t, exitOK); !strings.Contains(r.out, id) || !strings.Contains(r.out, "done") {
		t.Fatalf("jobs = %s", r.out)
	}
	if j := run("jobs", "--id", id, "--json").expect(t, exitOK).json(t); j["jobId"] != id {
		t.Fatalf("jobs --id = %v", j)
	}
	run("jobs", "--id", models.NewID()).expect(t, exitNotFound)
	if r := run("generate", "--prompt", "later", "--no-wait").expect(t, exitOK); !uuidRE.MatchString(strings.TrimSpace(r.out)) {
		t.Fatalf("--no-wait printed %q, want a job id", r.out)
	}
	run("templates", "--type", "image").expect(t, exitOK)
	run("templates", "--type", "nonsense").expect(t, exitUsage)

	// Exit codes scripts can test.
	run("generate").expect(t, exitUsage)
	run("generate", "--prompt", "x", "--template", "y").expect(t, exitUsage)
	run("generate", "--bogus-flag").expect(t, exitUsage)
	run("generate", "--template", "no-such-template", "--input", "a=b").expect(t, exitNotFound)
	t.Setenv("SERVICE_API_KEY", ts.tenantKey(0))
	if r := run("generate", "--prompt", "broke").expect(t, exitCredits); !strings.Contains(r.err, "insufficient credits") {
		t.Fatalf("stderr = %s", r.err)
	}
	t.Setenv("SERVICE_API_KEY", "sk-studio-AAAAAAAAAAAAAAAAAAAAAAAA")
	run("balance").expect(t, exitAuth)
	t.Setenv("SERVICE_API_KEY", "")
	run("generate", "--prompt", "x").expect(t, exitAuth)
}

func TestVideoWaitsAndDownloads(t *testing.T) {
	ts := startServer(t, nil)
	clientEnv(t, ts.srv.URL, ts.tenantKey(100))
	out := filepath.Join(t.TempDir(), "clip.mp4")
	r := run("video", "--prompt", "waves at dusk", "--duration", "4", "--resolution", "480p", "-o", out, "--json").expect(t, exitOK)
	if v := r.json(t); v["status"] != "done" || v["video_url"] == "" {
		t.Fatalf("video = %v", v)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Fatalf("download: %v", err)
	}
	run("video", "--prompt", "too long", "--duration", "99").expect(t, exitUsage)
}

// noisePNG writes a PNG of random pixels of about 1.9 MB: over the 1 MB threshold of direct uploads.
func noisePNG(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 700, 700))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(r.Uint32())
	}
	img.Set(0, 0, color.NRGBA{255, 0, 0, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "noise.png")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, buf.Bytes()
}

// fetch returns the body of a public URL.
func fetch(t *testing.T, u string) []byte {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s = %d", u, res.StatusCode)
	}
	return b
}

func TestUploadThroughTheServerWithoutAStore(t *testing.T) {
	ts := startServer(t, nil)
	clientEnv(t, ts.srv.URL, ts.tenantKey(1))
	path, data := noisePNG(t, t.TempDir())
	r := run("upload", path, "--json").expect(t, exitOK)
	up := r.json(t)
	if up["via"] != "proxy" || up["media_type"] != "image" || !bytes.Equal(fetch(t, up["url"].(string)), data) {
		t.Fatalf("upload = %v", up)
	}
	missing := run("upload", filepath.Join(t.TempDir(), "nope.png")).expect(t, exitUsage)
	if !strings.Contains(missing.err, "no such file") {
		t.Fatalf("stderr = %s", missing.err)
	}
	// A reference file is uploaded before the generation that uses it.
	gen := run("generate", "--prompt", "like this", "--reference", path, "--json").expect(t, exitOK)
	if gen.json(t)["status"] != "done" || !strings.Contains(gen.err, "uploaded "+path) {
		t.Fatalf("generate with a reference file:\n%s\n%s", gen.out, gen.err)
	}
}

// s3Vars starts a real S3-compatible server and returns the configuration that makes the service use it.
func s3Vars(t *testing.T) (media.S3Config, map[string]string) {
	cfg := s3test.Start(t)
	return cfg, map[string]string{"SERVICE_S3_ENDPOINT": cfg.Endpoint, "SERVICE_S3_BUCKET": cfg.Bucket, "SERVICE_S3_REGION": cfg.Region,
		"SERVICE_S3_ACCESS_KEY": cfg.AccessKey, "SERVICE_S3_SECRET_KEY": cfg.SecretKey, "SERVICE_S3_PUBLIC_URL": cfg.PublicURL}
}

func TestUploadDirectToTheStoreAndFallback(t *testing.T) {
	s3cfg, vars := s3Vars(t)
	ts := startServer(t, vars)
	clientEnv(t, ts.srv.URL, ts.tenantKey(1))
	path, data := noisePNG(t, t.TempDir())
	store, err := media.NewS3(s3cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The bucket is private to anonymous readers in the test server: read stored objects with the store.
	stored := func(u string) []byte {
		t.Helper()
		key, ok := store.KeyFromURL(u)
		if !ok {
			t.Fatalf("%s is not a URL of the bucket", u)
		}
		rc, _, err := store.Open(context.Background(), key)
		if err != nil {
			t.Fatalf("open %s: %v", key, err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return b
	}

	r := run("upload", path, "--json").expect(t, exitOK)
	up := r.json(t)
	if up["via"] != "direct" || !bytes.Equal(stored(up["url"].(string)), data) {
		t.Fatalf("direct upload = %v\n%s", up, r.err)
	}

	// The presigned URL now points at a store that fails: the client posts through the server instead,
	// after sending exactly the signed headers.
	var mu sync.Mutex
	var got http.Header
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		got.Set("X-Method", r.Method)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer broken.Close()
	u := broken.URL + "/bucket/object?X-Amz-Signature=x"
	ts.putURL.Store(&u)
	r = run("upload", path, "--json").expect(t, exitOK)
	up = r.json(t)
	if up["via"] != "proxy" || !strings.Contains(r.err, "direct upload failed") || !bytes.Equal(stored(up["url"].(string)), data) {
		t.Fatalf("fallback upload = %v\n%s", up, r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got.Get("X-Method") != "PUT" || got.Get("Content-Type") != "image/png" || got.Get("Authorization") != "" || got.Get("X-Api-Key") != "" {
		t.Fatalf("PUT headers = %v", got)
	}
}

func TestFailedJobAndRateLimitExitCodes(t *testing.T) {
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.ServerError})
	ch := func(name, family string, media upstream.Media) upstream.Config {
		return upstream.Config{Name: name, Provider: "p", Media: media, Family: family, Protocol: upstream.ProtocolOpenAI,
			BaseURL: fake.ChannelURL(name), APIKey: "k", Model: "m", SoftTimeout: 2 * time.Second, CostUSD: 0.04, Rating: 0.5}
	}
	ts := startServer(t, map[string]string{"SERVICE_GENERATE_RATE": "2"}, ch("img-a", "gen2", upstream.MediaImage), ch("chat-a", "chat", upstream.MediaChat))
	clientEnv(t, ts.srv.URL, ts.tenantKey(10))
	r := run("generate", "--prompt", "doomed").expect(t, exitJobFailed)
	if !strings.Contains(r.err, "failed") {
		t.Fatalf("stderr = %s", r.err)
	}
	run("generate", "--prompt", "second", "--no-wait").expect(t, exitOK)
	if r := run("generate", "--prompt", "third", "--no-wait").expect(t, exitRateLimited); !strings.Contains(r.err, "retry after") {
		t.Fatalf("stderr = %s", r.err)
	}
}
