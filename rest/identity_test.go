package rest_test

import (
	"testing"

	"studio/models/modelstest"
)

// TestIdentityMatrix checks spec section 5: every identity against a tenant-only endpoint, an
// administrator endpoint and a generation endpoint, with both header forms.
func TestIdentityMatrix(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	tenantID, tenantKey := e.tenant("Acme", 100)
	created := e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "create", "email": "m@acme.test", "nickname": "M"}).expect(t, 200)
	account := created.JSON["account"].(map[string]any)
	accountKey := account["api_key"].(string)
	off := e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "create", "email": "off@acme.test", "nickname": "Off"}).expect(t, 200)
	offAccount := off.JSON["account"].(map[string]any)
	e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "toggle", "account_id": offAccount["id"], "disabled": true}).expect(t, 200)
	_, login := e.personalLogin("me@example.com", 10)
	_ = tenantID

	adminBody := map[string]any{"action": "invitation-create"}
	genBody := map[string]any{"prompt": "matrix"}
	type want struct{ pool, admin, generate int }
	identities := []struct {
		name string
		cred string
		want want
	}{
		{"tenant key", tenantKey, want{200, 403, 200}},
		{"account key", accountKey, want{403, 403, 200}},
		{"personal login", login, want{403, 403, 200}},
		{"administrator key", e.adminKey, want{403, 200, 403}},
		{"disabled account key", offAccount["api_key"].(string), want{401, 401, 401}},
		{"no credential", "", want{401, 401, 401}},
		{"unknown key", "sk-studio-AAAAAAAAAAAAAAAAAAAAAAAA", want{401, 401, 401}},
		{"malformed token", "eyJhbGciOiJub25lIn0.e30.", want{401, 401, 401}},
	}
	for _, id := range identities {
		for _, form := range []string{"X-API-Key", "Authorization"} {
			h := map[string]string{}
			if id.cred != "" {
				if form == "X-API-Key" {
					h[form] = id.cred
				} else {
					h[form] = "Bearer " + id.cred
				}
			}
			t.Run(id.name+"/"+form, func(t *testing.T) {
				if r := e.callH("GET", "/api/tenant-pool", h, nil); r.Status != id.want.pool || r.str("error") == "" && r.Status != 200 {
					t.Errorf("tenant-pool: %d %s, want %d", r.Status, r.Body, id.want.pool)
				}
				if r := e.callH("POST", "/api/admin", h, adminBody); r.Status != id.want.admin {
					t.Errorf("admin: %d %s, want %d", r.Status, r.Body, id.want.admin)
				}
				if r := e.callH("POST", "/api/generate", h, genBody); r.Status != id.want.generate {
					t.Errorf("generate: %d %s, want %d", r.Status, r.Body, id.want.generate)
				}
			})
		}
	}
}

// TestCredentialForms checks that REST reads a credential as every surface does (models.CredentialFromHeader,
// the same forms as graph's TestCredentialForms): X-API-Key and "Authorization: Bearer" with the scheme in
// any case are accepted; another scheme and an empty bearer token are 401.
func TestCredentialForms(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("Acme", 5)
	for _, f := range modelstest.CredentialForms(key) {
		t.Run(f.Name, func(t *testing.T) {
			r := e.callH("GET", "/api/tenant-pool", f.Headers, nil)
			if !f.Accepted {
				if r.expect(t, 401); r.str("code") != "unauthenticated" {
					t.Fatalf("%v: %s, want code unauthenticated", f.Headers, r.Body)
				}
				return
			}
			if r.expect(t, 200); r.str("tenant_id") != tenantID {
				t.Fatalf("%v: %s, want tenant %s", f.Headers, r.Body, tenantID)
			}
		})
	}
}
