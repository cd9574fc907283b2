package graph_test

import (
	"testing"
	"time"

	"studio/models/modelstest"
)

// TestCredentialForms checks that GraphQL reads a credential as every surface does
// (models.CredentialFromHeader, the same forms as rest's TestCredentialForms), from the request headers
// and from a WebSocket connection_init payload: X-API-Key and "Authorization: Bearer" with the scheme in
// any case are accepted; another scheme and an empty bearer token are unauthenticated.
func TestCredentialForms(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("Acme", 5)
	for _, f := range modelstest.CredentialForms(key) {
		t.Run("http/"+f.Name, func(t *testing.T) {
			r := e.gqlAt(e.srv.URL+"/graphql", f.Headers, `{ tenantPool { tenantId } }`, nil)
			if !f.Accepted {
				if r.code() != "UNAUTHENTICATED" {
					t.Fatalf("%v: %+v, want UNAUTHENTICATED", f.Headers, r.Errors)
				}
				return
			}
			if got := r.must(t)["tenantPool"].(map[string]any)["tenantId"]; got != tenantID {
				t.Fatalf("%v: tenant %v, want %s", f.Headers, got, tenantID)
			}
		})
		t.Run("connection_init/"+f.Name, func(t *testing.T) {
			payload := map[string]any{}
			for k, v := range f.Headers {
				payload[k] = v
			}
			ws := dial(t, e.srv.URL, transportWS, nil)
			if f.Accepted {
				ws.mustInit(payload)
				return
			}
			if m, ok := ws.init(payload); ok {
				t.Fatalf("%v: got %s %s, want the connection closed", f.Headers, m.Type, m.Payload)
			}
			if code := ws.waitClosed(5 * time.Second); code != 4401 {
				t.Fatalf("%v: close code %d (%q), want 4401", f.Headers, code, ws.closeText)
			}
		})
	}
}
