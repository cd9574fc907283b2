package rest_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"studio/models"
	"studio/rest"
)

// isolationCase is one route called by tenant B with ids that belong to tenant A.
type isolationCase struct {
	method, path string
	query        string
	body         map[string]any
	want         int // the status B must get: 404 for another tenant's ids
}

// routeKey names a route as method + path template.
func routeKey(method, path string) string { return method + " " + path }

// TestTenantIsolationOnEveryRoute walks every REST route: routes that take an id are called by
// tenant B with tenant A's ids and must answer 404 (never the resource, never 403 that would confirm it
// exists); routes that take no id are listed explicitly, so a new route fails this test until it is
// classified.
func TestTenantIsolationOnEveryRoute(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, keyA := e.tenant("Alpha", 100)
	_, keyB := e.tenant("Beta", 100)
	accountA, _ := e.member(keyA, map[string]any{})
	tplA := e.tplCreate("/api/templates", keyA, tplImage("alpha-poster", "poster {title}"))
	e.tplCreate("/api/templates", keyA, tplSpec("article", "alpha-copy", "alpha copy spec"))
	vtplA := e.tplCreate("/api/video-templates", keyA, tplVideo("alpha-clip", map[string]any{"model": "auto", "prompt_template": "clip", "duration": 5}))
	hookA := e.call("POST", "/api/template-hooks", keyA, map[string]any{"image_template_slug": "alpha-poster", "hook_type": "video",
		"hook_template_slug": "alpha-clip"}).JSON["hook"].(map[string]any)["id"].(string)
	jobA := e.call("POST", "/api/generate", keyA, map[string]any{"prompt": "alpha secret"}).expect(t, 200).str("jobId")
	tenantA := e.tenantIDOf(keyA)
	videoA := models.NewID()
	if err := e.app.DB.Gorm.Create(&models.VideoTask{ID: videoA, TenantID: &tenantA, Status: models.VideoRunning, Model: "vidA-2-0-pro-260801",
		Resolution: "480p", Duration: 5, Credits: 5, Params: []byte("{}")}).Error; err != nil {
		t.Fatal(err)
	}
	var upload models.Upload
	e.app.DB.Gorm.Create(&models.Upload{ID: models.NewID(), OwnerKind: "tenant", OwnerID: tenantA, TenantID: &tenantA, Key: "uploads/alpha/pending.png",
		URL: e.app.Config.CDNURL + "/uploads/alpha/pending.png", MediaType: "image", MIME: "image/png", Size: 100, Committed: false})
	e.app.DB.Gorm.Model(&models.Upload{}).Where("key = ?", "uploads/alpha/pending.png").Update("committed", false).First(&upload)

	cases := []isolationCase{
		{"GET", "/api/jobs", "id=" + jobA, nil, 404},
		{"GET", "/api/videos", "id=" + videoA, nil, 404},
		{"DELETE", "/api/videos", "id=" + videoA, nil, 404},
		{"PATCH", "/api/templates", "", map[string]any{"id": tplA, "zh_name": "stolen"}, 404},
		{"PATCH", "/api/video-templates", "", map[string]any{"id": vtplA, "zh_name": "stolen"}, 404},
		{"PATCH", "/api/template-hooks", "", map[string]any{"id": hookA, "note": "stolen"}, 404},
		{"DELETE", "/api/template-hooks", "", map[string]any{"id": hookA}, 404},
		{"POST", "/api/tenant-accounts", "", map[string]any{"action": "set-quota", "account_id": accountA, "credits": 1}, 404},
		{"POST", "/api/tenant-accounts", "", map[string]any{"action": "rekey", "account_id": accountA}, 404},
		{"POST", "/api/tenant-accounts", "", map[string]any{"action": "toggle", "account_id": accountA, "disabled": true}, 404},
		{"POST", "/api/generate", "", map[string]any{"template_id": tplA, "input": map[string]any{"title": "x"}}, 404},
		{"POST", "/api/generate-batch", "", map[string]any{"items": []any{map[string]any{"template_id": tplA, "input": map[string]any{"title": "x"}}}}, 404},
		{"POST", "/api/videos", "", map[string]any{"template_id": vtplA, "duration": 5}, 404},
		{"POST", "/api/upload-ref/commit", "", map[string]any{"key": upload.Key}, 404},
		{"POST", "/api/article", "", map[string]any{"template_slug": "alpha-copy", "input": "a sentence"}, 404},
	}
	// Routes with no id of another tenant to pass (they act on the caller's own data or are public).
	noIDs := map[string]string{
		"GET /api/health": "public", "HEAD /api/health": "public", "GET /api/ready": "public", "HEAD /api/ready": "public",
		"GET /api/cli-guide": "public", "GET /api/doc-contracts": "public", "GET /api/openapi.json": "public",
		"POST /api/admin": "administrator only", "GET /api/balance": "own", "GET /api/tenant-pool": "own",
		"GET /api/tenant-stats": "own", "GET /api/tenant-usage": "own", "GET /api/tenant-accounts": "own (listed below)",
		"GET /api/templates": "own + platform (listed below)", "POST /api/templates": "creates own",
		"GET /api/video-templates": "own + platform (listed below)", "POST /api/video-templates": "creates own",
		"GET /api/skills": "visible only", "GET /api/template-hooks": "own (listed below)", "POST /api/template-hooks": "slugs checked for visibility",
		"POST /api/image-to-template": "creates own", "POST /api/upload-ref": "creates own", "POST /api/upload-ref/presign": "creates own",
		"POST /api/reverse": "no stored ids", "POST /api/chat/completions": "no stored ids", "POST /api/chat": "no stored ids",
		"GET /api/available-models": "catalogue", "GET /api/models": "catalogue", "GET /api/models/{model}": "catalogue",
		"POST /api/tenant-claims": "platform templates only",
		"GET /api/promo-claims":   "public by code", "POST /api/promo-claims": "public by code", "GET /api/claims": "personal login",
		"POST /api/auth/register/code": "public", "POST /api/auth/register": "public", "POST /api/auth/login": "public",
		"POST /api/auth/password": "personal login", "GET /api/whoami": "personal login", "GET /api/auth/oidc/start": "public",
		"GET /api/auth/oidc/callback": "public", "POST /api/auth/device": "public", "POST /api/auth/device/token": "public",
		"GET /metrics": "administrator only",
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[routeKey(c.method, c.path)] = true
		path := c.path
		if c.query != "" {
			path += "?" + c.query
		}
		var body any
		if c.body != nil {
			body = c.body
		}
		r := e.call(c.method, path, keyB, body)
		if r.Status != c.want {
			t.Errorf("%s %s with tenant A's id as tenant B: %d %s, want %d", c.method, path, r.Status, r.Body, c.want)
		}
		if strings.Contains(string(r.Body), "alpha") {
			t.Errorf("%s %s leaks tenant A's data: %s", c.method, path, r.Body)
		}
	}
	// Listings of B never include A's rows.
	for _, path := range []string{"/api/jobs", "/api/videos", "/api/templates?source=all", "/api/video-templates?source=all",
		"/api/template-hooks", "/api/tenant-accounts", "/api/skills"} {
		r := e.call("GET", path, keyB, nil).expect(t, 200)
		for _, id := range []string{jobA, videoA, tplA, vtplA, hookA, accountA} {
			if strings.Contains(string(r.Body), id) {
				t.Errorf("GET %s as tenant B lists tenant A's %s", path, id)
			}
		}
	}
	// Nothing of A changed.
	if row := e.tplRows("/api/templates?source=mine", keyA)["alpha-poster"]; row["zh_name"] == "stolen" {
		t.Error("tenant B renamed tenant A's template")
	}
	if v := e.call("GET", "/api/videos?id="+videoA, keyA, nil).expect(t, 200); v.str("status") == "cancelled" {
		t.Error("tenant B cancelled tenant A's video")
	}

	// Every registered route is classified.
	r := mux.NewRouter()
	rest.New(e.svc.Jobs.App, rest.Options{}).Register(r)
	var unclassified []string
	_ = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil || !strings.HasPrefix(tpl, "/api/") && tpl != "/metrics" {
			return nil
		}
		methods, _ := route.GetMethods()
		for _, m := range methods {
			k := routeKey(m, tpl)
			if !covered[k] && noIDs[k] == "" {
				unclassified = append(unclassified, k)
			}
		}
		return nil
	})
	sort.Strings(unclassified)
	if len(unclassified) > 0 {
		t.Errorf("routes without an isolation case or a reason: %v", unclassified)
	}
	_ = http.MethodGet
}
