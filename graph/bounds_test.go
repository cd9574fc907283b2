package graph_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"studio/graph"
)

// aliases returns a query of n fields that all answer under the response name a (the shape whose
// validation grows with n²).
func aliases(n int) string {
	return "{" + strings.Repeat(" a: __typename", n) + " }"
}

// wantLimit fails the test unless r is the refusal of a document bound whose message contains name.
func wantLimit(t *testing.T, what string, r *gqlResult, name string) {
	t.Helper()
	if r.Status != http.StatusUnprocessableEntity || r.code() != "QUERY_LIMIT_EXCEEDED" || !strings.Contains(r.Errors[0].Message, name) {
		t.Fatalf("%s: %d %+v, want 422 QUERY_LIMIT_EXCEEDED naming %s", what, r.Status, r.Errors, name)
	}
}

// TestLargeDocumentsAreRefusedBeforeValidation sends, without a key, documents whose validation costs
// seconds of CPU: they are refused by their size before gqlgen validates them.
func TestLargeDocumentsAreRefusedBeforeValidation(t *testing.T) {
	e := newEnv(t, withoutWorkers)
	// 10 000 aliases (140 kB): refused by its length.
	wantLimit(t, "10 000 aliases", e.gql("", aliases(10_000), nil), "MaxQueryBytes")
	// 1000 aliases of one name (15 kB, within the length and the tokens): refused by the fields at one path.
	r := e.gql("", aliases(1000), nil)
	wantLimit(t, "1000 fields named a", r, "MaxRepeatedField")
	if !strings.Contains(r.Errors[0].Message, "1000 fields answering at a,") {
		t.Fatalf("the message does not say where: %s", r.Errors[0].Message)
	}
	// 4000 distinct aliases: refused by the tokens or the fields, never answered.
	var b strings.Builder
	b.WriteString("{")
	for i := range 3000 {
		fmt.Fprintf(&b, " a%d: __typename", i)
	}
	b.WriteString(" }")
	wantLimit(t, "3000 distinct aliases", e.gql("", b.String(), nil), "MaxFields")
	// A fragment spread twice in a fragment spread twice ...: 2^20 fields from a few hundred bytes
	// (refused when 16 of them answer at one path).
	bomb := "query { ...F0 } fragment F20 on Query { __typename }"
	for i := range 20 {
		bomb += fmt.Sprintf(" fragment F%d on Query { ...F%d ...F%d }", i, i+1, i+1)
	}
	wantLimit(t, "fragment bomb", e.gql("", bomb, nil), "MaxRepeatedField")
	// Introspection is not weighed by the complexity limit: one __schema per operation.
	wantLimit(t, "two __schema", e.gql("", `{ a: __schema { types { name } } b: __schema { types { name } } }`, nil), "__schema 2 times")
	// GraphiQL's introspection query and an ordinary query pass.
	if d := e.gql("", introspection, nil).must(t); d["__schema"] == nil {
		t.Fatalf("introspection: %v", d)
	}
	if d := e.gql("", aliases(10), nil).must(t); d["a"] != "Query" {
		t.Fatalf("10 aliases: %v", d)
	}
}

// TestDocumentBoundsAreSettings checks each bound at its edge on a handler where it is low: the document
// at the bound is answered, one more is refused with the bound's name.
func TestDocumentBoundsAreSettings(t *testing.T) {
	e := newEnv(t, withoutWorkers)
	distinct := func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, " a%d: __typename", i)
		}
		return b.String() + " }"
	}
	cases := []struct {
		name     string
		opts     graph.Options
		ok, over string
	}{
		{"MaxQueryBytes", graph.Options{MaxQueryBytes: 200},
			"{ a: __typename }" + strings.Repeat(" ", 200-17), "{ a: __typename }" + strings.Repeat(" ", 200-16)},
		// Escaped in JSON ("\n" and, from Go's encoder, "\u003c" for <), the document is longer in the
		// body than the bound: it is its decoded length that counts.
		{"MaxQueryBytes", graph.Options{MaxQueryBytes: 200},
			"{ a: __typename }" + strings.Repeat("\n", 200-17), "{ a: __typename }" + strings.Repeat("\n", 200-16)},
		{"MaxQueryBytes", graph.Options{MaxQueryBytes: 200},
			"{ a: __typename } #" + strings.Repeat("<", 200-19), "{ a: __typename } #" + strings.Repeat("<", 200-18)},
		{"MaxQueryBytes", graph.Options{MaxQueryBytes: 200},
			"{ a: __typename } #" + strings.Repeat("é", (200-19)/2), "{ a: __typename } #" + strings.Repeat("é", (200-19)/2+1)},
		// { a: __typename } is 2 tokens and 3 per alias.
		{"MaxTokens", graph.Options{MaxTokens: 20}, distinct(6), distinct(7)},
		{"MaxNesting", graph.Options{MaxNesting: 4},
			`{ __type(name: "Job") { fields { type { name } } } }`, `{ __type(name: "Job") { fields { type { ofType { name } } } } }`},
		{"MaxFields", graph.Options{MaxFields: 12}, distinct(12), distinct(13)},
		{"MaxFields", graph.Options{MaxFields: 12},
			// A fragment counts at each spread, and once more on its own (validation checks it alone too).
			"query { ...F ...F ...F } fragment F on Query { a: __typename b: __typename c: __typename }",
			"query { ...F ...F ...F } fragment F on Query { a: __typename b: __typename c: __typename d: __typename }"},
		{"MaxRepeatedField", graph.Options{MaxRepeatedField: 3},
			"query { ...F a: __typename } fragment F on Query { a: __typename a: __typename }",
			"query { ...F ...F a: __typename } fragment F on Query { a: __typename a: __typename }"},
	}
	for _, c := range cases {
		srv := httptest.NewServer(graph.NewHandler(e.svc.Jobs.App, c.opts))
		if r := e.gqlAt(srv.URL, nil, c.ok, nil); len(r.Errors) > 0 || r.Data == nil {
			t.Fatalf("%s: at the bound: %d %+v", c.name, r.Status, r.Errors)
		}
		wantLimit(t, c.name, e.gqlAt(srv.URL, nil, c.over, nil), c.name)
		srv.Close()
	}
}

// TestDocumentBoundsOnEveryTransport checks that GET and a WebSocket subscribe message are bounded
// like POST.
func TestDocumentBoundsOnEveryTransport(t *testing.T) {
	e := newEnv(t, upstreams(t, 0, false))
	_, key := e.tenant("Acme", 1)
	res, err := http.Get(e.srv.URL + "/graphql?query=" + url.QueryEscape(aliases(1000)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(raw), "QUERY_LIMIT_EXCEEDED") ||
		!strings.Contains(string(raw), "MaxRepeatedField") {
		t.Fatalf("GET: %d %.300s", res.StatusCode, raw)
	}
	c := dial(t, e.srv.URL, transportWS, nil)
	c.mustInit(map[string]any{"X-API-Key": key})
	start := "subscription { jobs { jobId } }"
	c.subscribe("big", "subscription { jobs {"+strings.Repeat(" a: jobId", 500)+" } }", nil)
	m, ok := c.next(5 * time.Second)
	if !ok || m.Type != "error" || m.ID != "big" || !strings.Contains(string(m.Payload), "QUERY_LIMIT_EXCEEDED") ||
		!strings.Contains(string(m.Payload), "MaxRepeatedField") {
		t.Fatalf("WebSocket subscribe: %s %s %s, want an error QUERY_LIMIT_EXCEEDED", m.Type, m.ID, m.Payload)
	}
	// The connection stays usable: a subscription within the bounds starts.
	c.subscribe("small", start, nil)
	jobID := e.generate(key, map[string]any{"prompt": "x"})
	for {
		m, ok := c.next(10 * time.Second)
		if !ok {
			t.Fatalf("the small subscription never received job %s", jobID)
		}
		if m.Type == "error" {
			t.Fatalf("small subscription: %s", m.Payload)
		}
		var p struct {
			Data struct {
				Jobs struct {
					JobID string `json:"jobId"`
				} `json:"jobs"`
			} `json:"data"`
		}
		if json.Unmarshal(m.Payload, &p) == nil && p.Data.Jobs.JobID == jobID {
			return
		}
	}
}
