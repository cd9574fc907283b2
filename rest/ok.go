package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// okPrefix opens an answer that carries the spec's success flag.
const okPrefix = `{"ok":true`

// withOK is a view of the core answered with the spec's success flag "ok": true. The flag belongs to the
// REST answer, not to the core's view: withOK encodes v, which must encode as a JSON object, with "ok":
// true as its first member, byte for byte as if v had an `OK bool json:"ok"` first field.
type withOK struct{ v any }

// MarshalJSON writes {"ok":true, then the members of v.
func (o withOK) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(okPrefix)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as writeJSON: the answers' text is not escaped for HTML
	if err := enc.Encode(o.v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	n := len(okPrefix)
	if len(b) < n+2 || b[n] != '{' {
		return nil, fmt.Errorf("rest: %T does not encode as a JSON object", o.v)
	}
	if b[n+1] == '}' {
		return append(b[:n], '}'), nil // {} -> {"ok":true}
	}
	b[n] = ','
	return b, nil
}

// writeOK answers 200 with v (a view of the core, a JSON object) and "ok": true as its first member,
// where the spec's response shows the flag.
func writeOK(w http.ResponseWriter, v any) {
	writeJSON(w, http.StatusOK, withOK{v})
}
