package rest_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"studio/models"
	"studio/rest"
)

// hostileStrings are texts an attacker sends: PostgreSQL cannot store the first four, the last two are long.
var hostileStrings = []string{
	"a\x00b",
	"\x00",
	"a\xffb",
	"\xed\xa0\x80", // a UTF-16 surrogate written as UTF-8: not valid UTF-8
	strings.Repeat("a", 1<<20),
	strings.Repeat("é", 1<<19),
}

// hostileNumbers are JSON numbers no field should accept as-is.
var hostileNumbers = []string{"1e400", "-1e400", "123456789012345678901234567890", "9223372036854775808",
	"-9223372036854775809", "1.5", "-0"}

// hostileBodies are whole request bodies: deep nesting, a huge string, a NUL outside any string.
var hostileBodies = []string{
	strings.Repeat("[", 100000) + strings.Repeat("]", 100000),
	strings.Repeat(`{"a":`, 50000) + "1" + strings.Repeat("}", 50000),
	`"` + strings.Repeat("a", 1<<20) + `"`,
	"{\"a\":\"\x00\"}",
	"\x00",
}

// jsonString writes s as a JSON string keeping its bytes (encoding/json would replace invalid UTF-8).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jv is a JSON value whose string leaves can be swapped one at a time.
type jv struct {
	obj  map[string]*jv
	arr  []*jv
	raw  string // a scalar, already encoded
	text bool   // raw is a string (a leaf to make hostile)
	num  bool   // raw is a number
}

func (v *jv) encode(b *strings.Builder) {
	switch {
	case v.obj != nil:
		b.WriteByte('{')
		keys := make([]string, 0, len(v.obj))
		for k := range v.obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(k) + ":")
			v.obj[k].encode(b)
		}
		b.WriteByte('}')
	case v.arr != nil:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			e.encode(b)
		}
		b.WriteByte(']')
	default:
		b.WriteString(v.raw)
	}
}

func (v *jv) String() string { var b strings.Builder; v.encode(&b); return b.String() }

// leaves lists the scalar leaves of v.
func (v *jv) leaves(out []*jv) []*jv {
	switch {
	case v.obj != nil:
		keys := make([]string, 0, len(v.obj))
		for k := range v.obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = v.obj[k].leaves(out)
		}
	case v.arr != nil:
		for _, e := range v.arr {
			out = e.leaves(out)
		}
	default:
		out = append(out, v)
	}
	return out
}

// sample builds a harmless value of a schema: enums take their first value, ids a random UUID that names
// nothing, numbers 0 (so that an accepted request moves no credits).
func sample(s *openapi3.Schema, depth int) *jv {
	if s == nil || depth > 6 {
		return &jv{raw: `"x"`, text: true}
	}
	for _, alt := range [][]*openapi3.SchemaRef{s.OneOf, s.AnyOf, s.AllOf} {
		if len(alt) > 0 && alt[0].Value != nil {
			return sample(alt[0].Value, depth+1)
		}
	}
	t := s.Type
	switch {
	case len(s.Enum) > 0:
		if str, ok := s.Enum[0].(string); ok {
			return &jv{raw: jsonString(str), text: true}
		}
		return &jv{raw: fmt.Sprint(s.Enum[0])}
	case t != nil && t.Includes("object") || len(s.Properties) > 0:
		v := &jv{obj: map[string]*jv{}}
		for name, p := range s.Properties {
			v.obj[name] = sample(p.Value, depth+1)
		}
		return v
	case t != nil && t.Includes("array"):
		var item *openapi3.Schema
		if s.Items != nil {
			item = s.Items.Value
		}
		return &jv{arr: []*jv{sample(item, depth+1)}}
	case t != nil && (t.Includes("integer") || t.Includes("number")):
		return &jv{raw: "0", num: true}
	case t != nil && t.Includes("boolean"):
		return &jv{raw: "false"}
	case s.Format == "uuid":
		return &jv{raw: jsonString(models.NewID()), text: true}
	}
	return &jv{raw: `"x"`, text: true}
}

// hostileCase is one request of the run.
type hostileCase struct {
	method, path, query string
	headers             map[string]string
	body                string
}

// hostileCases derives, from every operation of rest/openapi.yaml, requests whose path parameters, query
// parameters, headers and JSON body leaves are hostile one at a time, and whole hostile bodies.
func hostileCases(t *testing.T, adminActions []models.AdminAction) []hostileCase {
	doc, err := rest.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	pathParam := regexp.MustCompile(`\{[^}]+\}`)
	var out []hostileCase
	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, p := range paths {
		item := doc.Paths.Value(p)
		for method, op := range item.Operations() {
			concrete := pathParam.ReplaceAllString(p, models.NewID())
			for _, h := range hostileStrings[:4] {
				if pathParam.MatchString(p) {
					out = append(out, hostileCase{method: method, path: pathParam.ReplaceAllString(p, url.PathEscape(h))})
				}
				out = append(out, hostileCase{method: method, path: concrete, headers: map[string]string{"Idempotency-Key": h, "X-CS-Agent": h}})
			}
			params := append(openapi3.Parameters{}, item.Parameters...)
			params = append(params, op.Parameters...)
			for _, pr := range params {
				if pr.Value == nil || pr.Value.In != "query" {
					continue
				}
				for _, h := range hostileStrings {
					out = append(out, hostileCase{method: method, path: concrete, query: url.Values{pr.Value.Name: {h}}.Encode()})
				}
				for _, n := range hostileNumbers {
					out = append(out, hostileCase{method: method, path: concrete, query: url.Values{pr.Value.Name: {n}}.Encode()})
				}
			}
			out = append(out, hostileCase{method: method, path: concrete, query: "id=%00&limit=%FF&cursor=%00"})
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			mt := op.RequestBody.Value.Content.Get("application/json")
			if mt == nil || mt.Schema == nil {
				continue
			}
			var bases []*jv
			if p == "/api/admin" {
				for _, a := range adminActions {
					v := &jv{obj: map[string]*jv{"action": {raw: jsonString(a.Name)}}}
					for _, pa := range a.Params {
						switch pa.Type {
						case "string":
							v.obj[pa.Name] = &jv{raw: jsonString(models.NewID()), text: true}
						case "bool":
							v.obj[pa.Name] = &jv{raw: "false"}
						default:
							v.obj[pa.Name] = &jv{raw: "0", num: true}
						}
					}
					bases = append(bases, v)
				}
			}
			bases = append(bases, sample(mt.Schema.Value, 0))
			for _, base := range bases {
				for _, leaf := range base.leaves(nil) {
					keep := leaf.raw
					var values []string
					if leaf.text {
						for _, h := range hostileStrings {
							values = append(values, jsonString(h))
						}
					}
					if leaf.num || leaf.text {
						values = append(values, hostileNumbers...)
					}
					for _, v := range values {
						leaf.raw = v
						out = append(out, hostileCase{method: method, path: concrete, body: base.String()})
					}
					leaf.raw = keep
				}
			}
			for _, b := range hostileBodies {
				out = append(out, hostileCase{method: method, path: concrete, body: b})
			}
		}
	}
	return out
}

// ledgerState is what no refused request may change: the ledger's rows and every balance.
func ledgerState(t *testing.T, e *env) string {
	t.Helper()
	var st struct {
		Rows, Sum, Tenants, Accounts, Users int64
	}
	db := e.app.DB
	db.Raw("SELECT count(*) AS rows, coalesce(sum(delta), 0) AS sum FROM ledger_entries").Scan(&st)
	db.Raw("SELECT coalesce(sum(spendable + reserved), 0) AS tenants FROM tenants").Scan(&st.Tenants)
	db.Raw("SELECT coalesce(sum(credits), 0) FROM accounts").Scan(&st.Accounts)
	db.Raw("SELECT coalesce(sum(credits), 0) FROM users").Scan(&st.Users)
	if problems, err := e.app.AuditLedger(t.Context()); err != nil || len(problems) > 0 {
		t.Fatalf("ledger audit: %v %v", err, problems)
	}
	return fmt.Sprintf("%+v", st)
}

// TestHostileInputRouteTable sends every operation of the REST route table hostile strings (NUL,
// invalid UTF-8, 1 MB), huge numbers and deeply nested bodies, with the administrator's and a tenant's
// key: no answer may be a 5xx, NUL and invalid UTF-8 must be refused with 400 naming the field, and the
// ledger must not move. HOSTILE_SAMPLE=n runs every n-th case only (CI bounds the run with it).
func TestHostileInputRouteTable(t *testing.T) {
	e := newEnv(t, withVar("SERVICE_GENERATE_RATE", "1000000"), withVar("SERVICE_UPLOAD_RATE", "1000000"))
	e.skipSpec = true // hostile requests are outside the documented shapes
	_, tenantKey := e.tenant("Hostile", 50)
	before := ledgerState(t, e)
	cases := hostileCases(t, e.app.Admin.List())
	step := 1
	if n, err := strconv.Atoi(os.Getenv("HOSTILE_SAMPLE")); err == nil && n > 1 {
		step = n
	}
	var sent, refusedText int
	statuses := map[int]int{}
	for i := 0; i < len(cases); i += step {
		c := cases[i]
		for _, key := range []string{tenantKey, e.adminKey} {
			status, body := e.rawCall(c, key)
			sent++
			statuses[status]++
			if status >= 500 {
				t.Errorf("%s %s?%.80s body %.120q: %d %s", c.method, c.path, c.query, c.body, status, body)
				continue
			}
			if bytes.Contains(body, []byte("NUL character")) || bytes.Contains(body, []byte("not valid UTF-8")) {
				refusedText++
				if status != http.StatusBadRequest || !bytes.Contains(body, []byte(`"error":"field `)) {
					t.Errorf("%s %s: refused text with %d %s, want 400 naming the field", c.method, c.path, status, body)
				}
			}
		}
	}
	if after := ledgerState(t, e); after != before {
		t.Errorf("the ledger moved: before %s, after %s", before, after)
	}
	t.Logf("%d cases, %d requests, %d refused for their text; statuses %v", len(cases), sent, refusedText, statuses)
	if refusedText == 0 {
		t.Errorf("no request was refused for its text")
	}
}

// rawCall sends one hostile case with a key, outside the harness's JSON encoding.
func (e *env) rawCall(c hostileCase, key string) (int, []byte) {
	e.t.Helper()
	u := e.srv.URL + c.path
	if c.query != "" {
		u += "?" + c.query
	}
	var rd io.Reader
	if c.body != "" {
		rd = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, u, rd)
	if err != nil {
		// A path Go refuses to send (the client checks it): nothing to test.
		return 0, nil
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", key)
	for k, v := range c.headers {
		req.Header[k] = []string{v}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error()) // the client refuses a NUL in a header value
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode, b
}
