package rest_test

import (
	"sync"
	"testing"
)

func TestIdempotencyKeyReplaysTheFirstResponse(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)
	h := map[string]string{"X-API-Key": key, "Idempotency-Key": "order-42"}
	first := e.callH("POST", "/api/generate", h, map[string]any{"prompt": "a fox"}).expect(t, 200)
	again := e.callH("POST", "/api/generate", h, map[string]any{"prompt": "a fox"}).expect(t, 200)
	if again.str("jobId") != first.str("jobId") || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat = %s, want the first answer %s replayed", again.Body, first.Body)
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 9 {
		t.Fatalf("credits = %v, want 9 (charged once)", b.num("credits"))
	}
	other := e.callH("POST", "/api/generate", h, map[string]any{"prompt": "another"})
	if other.Status != 422 || other.str("error") == "" {
		t.Fatalf("same key, other body = %d %s, want 422", other.Status, other.Body)
	}
	// Keys belong to one identity: another tenant may use the same key for its own request.
	_, key2 := e.tenant("Other", 10)
	e.callH("POST", "/api/generate", map[string]string{"X-API-Key": key2, "Idempotency-Key": "order-42"}, map[string]any{"prompt": "a fox"}).expect(t, 200)
	// A refused first attempt does not burn the key.
	_, poor := e.tenant("Poor", 0)
	hp := map[string]string{"X-API-Key": poor, "Idempotency-Key": "k1"}
	e.callH("POST", "/api/generate", hp, map[string]any{"prompt": "x"}).expect(t, 402)
	e.admin(map[string]any{"action": "tenant-credit", "tenant_id": e.tenantIDOf(poor), "credits": 1})
	e.callH("POST", "/api/generate", hp, map[string]any{"prompt": "x"}).expect(t, 200)
}

func TestIdempotencyKeyUnderConcurrentRepeats(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	_, key := e.tenant("Acme", 10)
	h := map[string]string{"X-API-Key": key, "Idempotency-Key": "burst"}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := e.callH("POST", "/api/generate-batch", h, map[string]any{"items": []map[string]any{{"prompt": "a"}, {"prompt": "b"}}})
			if r.Status == 200 {
				ids[i] = r.JSON["jobs"].([]any)[0].(map[string]any)["jobId"].(string)
			} else if r.Status != 409 {
				t.Errorf("concurrent repeat = %d %s, want 200 or 409", r.Status, r.Body)
			}
		}(i)
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range ids {
		if id != "" {
			seen[id] = true
		}
	}
	if len(seen) != 1 {
		t.Fatalf("concurrent repeats created %d different batches, want 1", len(seen))
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 8 {
		t.Fatalf("credits = %v, want 8 (one batch of two)", b.num("credits"))
	}
}

// tenantIDOf returns the tenant id behind a tenant key.
func (e *env) tenantIDOf(key string) string {
	e.t.Helper()
	return e.call("GET", "/api/tenant-pool", key, nil).expect(e.t, 200).str("tenant_id")
}

func TestIdempotencyKeyOnAccountsAndClaims(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 100)
	h := map[string]string{"X-API-Key": key, "Idempotency-Key": "member-1"}
	a := e.callH("POST", "/api/tenant-accounts", h, map[string]any{"action": "create", "email": "m@acme.test", "credits": 10}).expect(t, 200)
	b := e.callH("POST", "/api/tenant-accounts", h, map[string]any{"action": "create", "email": "m@acme.test", "credits": 10}).expect(t, 200)
	if a.JSON["account"].(map[string]any)["id"] != b.JSON["account"].(map[string]any)["id"] {
		t.Fatalf("a repeated create made a second account: %s / %s", a.Body, b.Body)
	}
	if p := e.call("GET", "/api/tenant-pool", key, nil); p.num("spendable") != 90 || p.num("reserved") != 10 {
		t.Fatalf("pool after a repeated create = %s", p.Body)
	}
	list := e.call("GET", "/api/tenant-accounts", key, nil).expect(t, 200)
	if n := len(list.JSON["accounts"].([]any)); n != 1 {
		t.Fatalf("accounts = %d, want 1", n)
	}
}
