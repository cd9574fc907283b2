package rest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"studio/models"
	"studio/rest"
)

func TestHealthAndPublicDocuments(t *testing.T) {
	e := newEnv(t)
	r := e.call("GET", "/api/health", "", nil).expect(t, 200)
	if r.JSON["ok"] != true || r.str("database") != "ok" {
		t.Fatalf("health = %s", r.Body)
	}
	g := e.call("GET", "/api/cli-guide", "", nil).expect(t, 200)
	if g.str("command") != "studio" {
		t.Fatalf("cli-guide = %s", g.Body)
	}
	d := e.call("GET", "/api/doc-contracts", "", nil).expect(t, 200)
	tiers, _ := d.JSON["video_tiers"].([]any)
	if len(tiers) != 5 {
		t.Fatalf("doc-contracts video_tiers = %d, want 5", len(tiers))
	}
	o := e.call("GET", "/api/openapi.json", "", nil).expect(t, 200)
	if o.str("openapi") != "3.0.3" {
		t.Fatalf("openapi version = %q", o.str("openapi"))
	}
}

func TestHealthReportsDatabaseDown(t *testing.T) {
	e := newEnv(t)
	e.svc.DB.Close()
	r := e.call("GET", "/api/health", "", nil)
	if r.Status != http.StatusServiceUnavailable || r.JSON["ok"] != false {
		t.Fatalf("health with closed database = %d %s, want 503", r.Status, r.Body)
	}
}

func TestAdminCreatesTenantAndBothHeaderFormsWork(t *testing.T) {
	e := newEnv(t)
	r := e.callH("POST", "/api/admin", map[string]string{"Authorization": "Bearer " + e.adminKey},
		map[string]any{"action": "tenant-create", "name": "Acme", "credits": 50}).expect(t, 200)
	key := r.str("api_key")
	if !models.ValidKeyFormat(key) {
		t.Fatalf("api_key %q does not match sk-studio- + 24", key)
	}
	tenant := r.JSON["tenant"].(map[string]any)
	for _, h := range []map[string]string{{"X-API-Key": key}, {"Authorization": "Bearer " + key}} {
		p := e.callH("GET", "/api/tenant-pool", h, nil).expect(t, 200)
		if p.str("tenant_id") != tenant["id"] || p.str("name") != "Acme" || p.num("balance") != 50 || p.num("spendable") != 50 {
			t.Fatalf("pool via %v = %s", h, p.Body)
		}
	}
	var stored models.APIKey
	if err := e.app.DB.Gorm.First(&stored, "tenant_id = ?", tenant["id"]).Error; err != nil {
		t.Fatal(err)
	}
	if stored.Hash != models.HashKey(key) || stored.Sealed != "" {
		t.Fatalf("tenant key must be stored only as its SHA-256 hash")
	}
}

func TestAdminRejectsBadInput(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme", 0)
	cases := []struct {
		name   string
		key    string
		body   any
		status int
	}{
		{"malformed JSON", e.adminKey, `{"action":`, 400},
		{"not an object", e.adminKey, `[1,2]`, 400},
		{"empty body", e.adminKey, ``, 400},
		{"unknown action", e.adminKey, map[string]any{"action": "tenant-explode"}, 400},
		{"missing action", e.adminKey, map[string]any{"name": "x"}, 400},
		{"missing name", e.adminKey, map[string]any{"action": "tenant-create"}, 400},
		{"credits not an integer", e.adminKey, `{"action":"tenant-create","name":"x","credits":"lots"}`, 400},
		{"credit unknown tenant", e.adminKey, map[string]any{"action": "tenant-credit", "tenant_id": models.NewID(), "credits": 5}, 404},
		{"tenant key", tenantKey, map[string]any{"action": "tenant-create", "name": "x"}, 403},
		{"no key", "", map[string]any{"action": "tenant-create", "name": "x"}, 401},
		{"unknown key", models.NewAPIKey(), map[string]any{"action": "tenant-create", "name": "x"}, 401},
		{"garbage key", "not-a-key", map[string]any{"action": "tenant-create", "name": "x"}, 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/admin", c.key, c.body)
			if r.Status != c.status || r.str("error") == "" {
				t.Fatalf("got %d %s, want %d with an error message", r.Status, r.Body, c.status)
			}
		})
	}
	var n int64
	e.app.DB.Gorm.Model(&models.Tenant{}).Count(&n)
	if n != 1 {
		t.Fatalf("tenants = %d after rejected requests, want 1", n)
	}
}

func TestRekeyInvalidatesOldKeyAtOnce(t *testing.T) {
	e := newEnv(t)
	id, oldKey := e.tenant("Acme", 10)
	e.call("GET", "/api/tenant-pool", oldKey, nil).expect(t, 200)
	r := e.admin(map[string]any{"action": "tenant-rekey", "tenant_id": id})
	newKey := r.str("api_key")
	if newKey == oldKey || !models.ValidKeyFormat(newKey) {
		t.Fatalf("rekey returned %q", newKey)
	}
	e.call("GET", "/api/tenant-pool", oldKey, nil).expect(t, 401)
	e.call("GET", "/api/tenant-pool", newKey, nil).expect(t, 200)
}

func TestTenantCreditAdjustsPool(t *testing.T) {
	e := newEnv(t)
	id, _ := e.tenant("Acme", 10)
	r := e.admin(map[string]any{"action": "tenant-credit", "tenant_id": id, "credits": 15})
	if r.num("balance") != 25 || r.num("spendable") != 25 || r.num("reserved") != 0 {
		t.Fatalf("credit = %s", r.Body)
	}
	e.call("POST", "/api/admin", e.adminKey, map[string]any{"action": "tenant-credit", "tenant_id": id, "credits": -26}).expect(t, 400)
	r = e.admin(map[string]any{"action": "tenant-credit", "tenant_id": id, "credits": -25})
	if r.num("balance") != 0 {
		t.Fatalf("after removing all credits: %s", r.Body)
	}
}

// personalLogin creates a personal account directly and returns a login token for it.
func (e *env) personalLogin(email string, credits int64) (userID, token string) {
	e.t.Helper()
	u := models.User{ID: models.NewID(), Email: email, Credits: credits}
	if err := e.app.DB.Gorm.Create(&u).Error; err != nil {
		e.t.Fatal(err)
	}
	tok, _, err := e.app.Auth().IssueUserToken(u.ID, models.LoginTTL)
	if err != nil {
		e.t.Fatal(err)
	}
	return u.ID, tok
}

func TestPersonalLoginTokenExpiresAfterSevenDays(t *testing.T) {
	e := newEnv(t)
	_, tok := e.personalLogin("me@example.com", 3)
	r := e.callH("GET", "/api/balance", map[string]string{"Authorization": "Bearer " + tok}, nil).expect(t, 200)
	if r.num("credits") != 3 || r.str("identity") != "account" {
		t.Fatalf("balance = %s", r.Body)
	}
	start := time.Now()
	e.app.Now = func() time.Time { return start.Add(models.LoginTTL - time.Minute) }
	e.callH("GET", "/api/balance", map[string]string{"Authorization": "Bearer " + tok}, nil).expect(t, 200)
	e.app.Now = func() time.Time { return start.Add(models.LoginTTL + time.Minute) }
	r = e.callH("GET", "/api/balance", map[string]string{"Authorization": "Bearer " + tok}, nil).expect(t, 401)
	if r.str("error") == "" {
		t.Fatal("expired login must say so")
	}
	e.app.Now = func() time.Time { return time.Now().UTC() }
	e.callH("GET", "/api/balance", map[string]string{"Authorization": "Bearer " + tok + "x"}, nil).expect(t, 401)
}

func TestAdminKeyGeneratedOnceOnFirstStart(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { delete(c.vars, "SERVICE_ADMIN_KEY") })
	key, err := e.app.Auth().EnsureAdminKey(context.Background())
	if err != nil || !models.ValidKeyFormat(key) {
		t.Fatalf("first start: key %q err %v", key, err)
	}
	again, err := e.app.Auth().EnsureAdminKey(context.Background())
	if err != nil || again != "" {
		t.Fatalf("second start printed a key again: %q %v", again, err)
	}
	e.call("POST", "/api/admin", key, map[string]any{"action": "invitation-create", "count": 2}).expect(t, 200)
}

func TestMetricsAndReadiness(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)
	e.call("POST", "/api/generate", key, map[string]any{"prompt": "x"}).expect(t, 200)
	e.call("GET", "/api/ready", "", nil).expect(t, 200)
	e.call("GET", "/metrics", key, nil).expect(t, 403)
	e.call("GET", "/metrics", "", nil).expect(t, 401)
	r := e.call("GET", "/metrics", e.adminKey, nil).expect(t, 200)
	for _, want := range []string{`studio_http_requests_total{method="POST",route="/api/generate",status="200"}`,
		"studio_jobs_submitted_total", "studio_upstream_health_score", "studio_queue_jobs", "studio_queue_oldest_available_seconds", "studio_credits_total"} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	_ = e.svc.Stop(context.Background())
	e.call("GET", "/api/ready", "", nil).expect(t, 503)
}

// TestOpenAPIDocumentIsComplete: the document is valid OpenAPI 3.0 (examples checked against their
// schemas), every operation has an operationId, every request body an example, and every error
// response the shape of its paths (Error, or OpenAIError on the OpenAI-style ones).
func TestOpenAPIDocumentIsComplete(t *testing.T) {
	doc, err := rest.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("rest/openapi.yaml is not valid OpenAPI: %v", err)
	}
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", where)
			} else if prev, dup := seen[op.OperationID]; dup {
				t.Errorf("%s and %s share operationId %s", where, prev, op.OperationID)
			}
			seen[op.OperationID] = where
			if op.RequestBody != nil {
				for ct, mt := range op.RequestBody.Value.Content {
					if mt.Example == nil && len(mt.Examples) == 0 {
						t.Errorf("%s: the %s request body has no example", where, ct)
					}
				}
			}
			want := "Error"
			if strings.HasPrefix(path, "/api/models") || path == "/api/chat/completions" {
				want = "OpenAIError"
			}
			for status, r := range op.Responses.Map() {
				if status[0] != '4' && status[0] != '5' || path == "/metrics" || path == "/api/health" || path == "/api/ready" {
					continue
				}
				mt := r.Value.Content.Get("application/json")
				if mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/"+want {
					t.Errorf("%s -> %s: the error response is not schema %s", where, status, want)
				}
			}
		}
	}
}
