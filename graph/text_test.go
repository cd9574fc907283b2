package graph_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUnstorableTextRefused: a NUL or invalid UTF-8 in GraphQL variables (checked with the HTTP body) or
// written in the query itself (checked on the arguments of the root field) is refused naming the field,
// and nothing is charged.
func TestUnstorableTextRefused(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 5)
	balance := func() float64 {
		_, b := e.rest("GET", "/api/balance", key, nil)
		f, _ := b["balance"].(float64)
		return f
	}
	before := balance()

	// Variables: refused with the body, before GraphQL runs.
	raw := []byte(`{"query":"mutation($in: GenerateInput!) { generate(input: $in) { jobId } }","variables":{"in":{"prompt":"a\u0000b"}}}`)
	req, _ := http.NewRequest("POST", e.srv.URL+"/graphql", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var out struct{ Error string }
	_ = json.Unmarshal(body, &out)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(out.Error, `field "variables.in.prompt" contains a NUL`) {
		t.Fatalf("NUL in variables: %d %s", res.StatusCode, body)
	}

	// Written in the query: GraphQL decodes the escape, the argument check refuses it.
	for _, q := range []string{
		`mutation { generate(input: {prompt: "a\u0000b"}) { jobId } }`,
		`query { job(id: "a\u0000b") { jobId } }`,
	} {
		r := e.gql(key, q, nil)
		if r.code() != "BAD_USER_INPUT" || !strings.Contains(r.Errors[0].Message, "NUL character") {
			t.Fatalf("%s: %+v", q, r.Errors)
		}
	}
	if after := balance(); after != before {
		t.Fatalf("balance moved from %v to %v", before, after)
	}
}
