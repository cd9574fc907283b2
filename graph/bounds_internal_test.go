package graph

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// The body pre-check reads the query of a JSON body as encoding/json does: same string, same length.
func TestJSONMemberAndUnescapedLenAgreeWithEncodingJSON(t *testing.T) {
	alphabet := []rune("ab {}[]:,\"\\\n\t<>&é€😀\u2028\x01")
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		q := make([]rune, r.IntN(40))
		for i := range q {
			q[i] = alphabet[r.IntN(len(alphabet))]
		}
		body, _ := json.Marshal(map[string]any{"variables": map[string]any{"x": []any{string(q), 1, nil}}, "query": string(q), "z": true})
		raw, ok := jsonMember(body, "query")
		if !ok {
			t.Fatalf("query not found in %s", body)
		}
		if n := unescapedLen(raw); n != len(string(q)) {
			t.Fatalf("unescapedLen(%s) = %d, want %d", raw, n, len(string(q)))
		}
	}
	for _, body := range []string{`[]`, `{"query": 1}`, `{"query"`, `{"a": "x\"`, `{"query": "x`} {
		if _, ok := jsonMember([]byte(body), "query"); ok {
			t.Fatalf("jsonMember(%s) found a query", body)
		}
	}
}
