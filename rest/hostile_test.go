package rest_test

import (
	"bytes"
	"database/sql"
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
	// contentType is sent as the Content-Type of the body when typed is set (empty: no header);
	// otherwise a body goes as application/json.
	contentType string
	typed       bool
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
	db.Gorm.Raw("SELECT count(*) AS rows, coalesce(sum(delta), 0) AS sum FROM ledger_entries").Scan(&st)
	db.Gorm.Raw("SELECT coalesce(sum(spendable + reserved), 0) AS tenants FROM tenants").Scan(&st.Tenants)
	db.Gorm.Raw("SELECT coalesce(sum(credits), 0) FROM accounts").Scan(&st.Accounts)
	db.Gorm.Raw("SELECT coalesce(sum(credits), 0) FROM users").Scan(&st.Users)
	if problems, err := e.app.Credits().AuditLedger(t.Context()); err != nil || len(problems) > 0 {
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
	switch {
	case c.typed && c.contentType != "":
		req.Header.Set("Content-Type", c.contentType)
	case c.typed:
	case c.body != "":
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

// bodyContentTypes are the Content-Type headers a client may send a JSON body with: curl -d sends
// application/x-www-form-urlencoded, some send text/plain, some none at all. Every surface decodes the
// body as JSON whatever the header says, so every one must be checked alike.
var bodyContentTypes = []string{"application/json", "application/x-www-form-urlencoded", "text/plain", ""}

// longStrings are the 200 000-character values sent in every field: no text field may be used before a
// bound has refused them (a database column, a rate-limit key, a log line).
var longStrings = []string{strings.Repeat("a", 200_000), strings.Repeat("é", 200_000)}

// bodyCase is one request of the body walk: a JSON body with one hostile leaf.
type bodyCase struct {
	method, path, field string
	body                string
	text                bool // the hostile value is a NUL or invalid UTF-8: it must be refused
}

// bodyCases derives, from every operation of rest/openapi.yaml with a request body (and every
// administrator action), bodies whose string leaves are, one at a time, each hostile string and each
// 200 000-character string.
func bodyCases(t *testing.T, adminActions []models.AdminAction) map[string][]bodyCase {
	doc, err := rest.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	pathParam := regexp.MustCompile(`\{[^}]+\}`)
	values := append(append([]string{}, hostileStrings[:4]...), longStrings...)
	out := map[string][]bodyCase{}
	for _, p := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(p)
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			mt := op.RequestBody.Value.Content.Get("application/json")
			if mt == nil || mt.Schema == nil {
				continue
			}
			concrete := pathParam.ReplaceAllString(p, models.NewID())
			var bases []*jv
			if p == "/api/admin" {
				for _, a := range adminActions {
					v := &jv{obj: map[string]*jv{"action": {raw: jsonString(a.Name)}}}
					for _, pa := range a.Params {
						switch pa.Type {
						case "string":
							v.obj[pa.Name] = &jv{raw: jsonString("x" + models.NewID()[:8]), text: true}
						case "bool":
							v.obj[pa.Name] = &jv{raw: "false"}
						default:
							v.obj[pa.Name] = &jv{raw: "1", num: true}
						}
					}
					bases = append(bases, v)
				}
			}
			bases = append(bases, sample(mt.Schema.Value, 0))
			op := method + " " + concrete
			for _, base := range bases {
				for i, leaf := range base.leaves(nil) {
					if !leaf.text {
						continue
					}
					keep := leaf.raw
					for j, h := range values {
						leaf.raw = jsonString(h)
						out[op] = append(out[op], bodyCase{method: method, path: concrete, field: fmt.Sprintf("leaf %d", i),
							body: base.String(), text: j < 4})
					}
					leaf.raw = keep
				}
				// An object key is text too.
				if base.obj != nil {
					for j, h := range values {
						base.obj[h] = &jv{raw: `"x"`}
						out[op] = append(out[op], bodyCase{method: method, path: concrete, field: "a key", body: base.String(), text: j < 4})
						delete(base.obj, h)
					}
				}
			}
		}
	}
	return out
}

// dbFingerprint is what a refused request must not change: the number of rows of every table and the
// latest update of each that records one (counters of calls, health and idempotency records, which a
// refusal may legitimately write, are left out), with the ledger state.
func dbFingerprint(t *testing.T, e *env) string {
	t.Helper()
	// Usage of accepted calls is written a moment later (RecordUsage): write it now, so that it is not
	// seen as a change made by the next requests.
	if err := e.app.Credits().FlushUsage(t.Context()); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	db := e.app.DB
	for _, ent := range models.AllEntities() {
		switch ent.(type) {
		case *models.RateCounter, *models.UpstreamAttempt, *models.UpstreamState, *models.IdempotencyRecord, *models.Setting:
			continue
		}
		var n int64
		if err := db.Gorm.Model(ent).Count(&n).Error; err != nil {
			t.Fatalf("count %T: %v", ent, err)
		}
		fmt.Fprintf(&b, "%T=%d ", ent, n)
		if db.Gorm.Migrator().HasColumn(ent, "UpdatedAt") {
			var latest sql.NullString
			if err := db.Gorm.Model(ent).Select("MAX(updated_at)").Row().Scan(&latest); err != nil {
				t.Fatalf("latest update of %T: %v", ent, err)
			}
			fmt.Fprintf(&b, "@%s ", latest.String)
		}
	}
	return b.String() + ledgerState(t, e)
}

// TestHostileBodiesEveryContentType sends every request body of every REST operation (and every
// administrator action) with each string field and each object key, one at a time, set to a NUL, invalid
// UTF-8 and a 200 000-character string, under every Content-Type a client may send (application/json,
// application/x-www-form-urlencoded as curl -d sends, text/plain, none), with a tenant's and the
// administrator's key. No answer may be a 5xx; NUL and invalid UTF-8 must be refused with 400 whatever
// the Content-Type; and no refused request may change anything in the database. HOSTILE_SAMPLE=n sends
// every n-th case only.
func TestHostileBodiesEveryContentType(t *testing.T) {
	e := newEnv(t, withVar("SERVICE_GENERATE_RATE", "1000000"), withVar("SERVICE_UPLOAD_RATE", "1000000"))
	e.skipSpec = true
	_, tenantKey := e.tenant("Hostile", 50)
	step := 1
	if n, err := strconv.Atoi(os.Getenv("HOSTILE_SAMPLE")); err == nil && n > 1 {
		step = n
	}
	cases := bodyCases(t, e.app.Admin.List())
	ops := make([]string, 0, len(cases))
	for op := range cases {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	before := dbFingerprint(t, e)
	var sent, accepted int
	statuses := map[int]int{}
	k := 0
	for _, op := range ops {
		okInOp := 0
		var acceptedBodies []string
		for _, c := range cases[op] {
			for _, ct := range bodyContentTypes {
				k++
				if k%step != 0 {
					continue
				}
				for _, key := range []string{tenantKey, e.adminKey} {
					status, body := e.rawCall(hostileCase{method: c.method, path: c.path, body: c.body, contentType: ct, typed: true}, key)
					sent++
					statuses[status]++
					switch {
					case status >= 500 || status == 0:
						t.Errorf("%s (%s, Content-Type %q): %d %s", op, c.field, ct, status, body)
					case c.text && status < 400:
						t.Errorf("%s (%s, Content-Type %q): a NUL or invalid UTF-8 was accepted with %d %s", op, c.field, ct, status, body)
					case c.text && status == http.StatusBadRequest && !bytes.Contains(body, []byte("NUL character")) &&
						!bytes.Contains(body, []byte("not valid UTF-8")):
						t.Errorf("%s (%s, Content-Type %q): 400 without naming the bad text: %s", op, c.field, ct, body)
					case status < 300:
						okInOp++
						accepted++
						if len(acceptedBodies) < 3 {
							acceptedBodies = append(acceptedBodies, fmt.Sprintf("%.150q", c.body))
						}
					}
				}
			}
		}
		after := dbFingerprint(t, e)
		if okInOp == 0 && after != before {
			t.Errorf("%s: refused requests changed the database: %s", op, fingerprintDiff(before, after))
		}
		if okInOp > 0 {
			t.Logf("%s: %d requests with a 200 000-character field were accepted: %s", op, okInOp, strings.Join(acceptedBodies, "; "))
		}
		before = after
	}
	t.Logf("%d operations, %d requests, %d accepted; statuses %v", len(ops), sent, accepted, statuses)
	if sent == 0 {
		t.Fatal("no request was sent")
	}
}

// TestHostileMultipartNamesAndFields walks the multipart operations (upload-ref, reverse): a hostile
// field name, file name and field value, one at a time; no answer may be a 5xx, a NUL or invalid UTF-8
// name is refused with 400 naming it, and nothing changes.
func TestHostileMultipartNamesAndFields(t *testing.T) {
	e := newEnv(t, withVar("SERVICE_UPLOAD_RATE", "1000000"))
	e.skipSpec = true
	_, tenantKey := e.tenant("Hostile", 50)
	before := dbFingerprint(t, e)
	values := append(append([]string{}, hostileStrings[:4]...), longStrings...)
	// part is one multipart part: its Content-Disposition parameters as raw bytes (quoting them would
	// escape the hostile bytes into harmless text) and its content.
	type part struct{ disp, value string }
	quoted := func(name, filename string) string {
		d := `name="` + name + `"`
		if filename != "" {
			d += `; filename="` + filename + `"`
		}
		return d
	}
	var sent int
	for _, path := range []string{"/api/upload-ref", "/api/reverse"} {
		for i, h := range values {
			for j, parts := range [][]part{
				{{quoted(h, ""), "x"}},
				{{quoted("file", h), "not a picture"}},
				{{quoted(h, h), h}},
				// RFC 2231 extended parameters: the multipart reader decodes %00 into a NUL.
				{{"name*=UTF-8''" + url.PathEscape(h), "x"}},
				{{`name="file"; filename*=UTF-8''` + url.PathEscape(h), "not a picture"}},
				// A hostile value: refused by the field's own rule.
				{{quoted("workspace_id", ""), h}, {quoted("file", "a.png"), "not a picture"}},
			} {
				var buf bytes.Buffer
				boundary := "hostileboundary0123456789"
				for _, p := range parts {
					fmt.Fprintf(&buf, "--%s\r\nContent-Disposition: form-data; %s\r\n\r\n%s\r\n", boundary, p.disp, p.value)
				}
				fmt.Fprintf(&buf, "--%s--\r\n", boundary)
				status, body := e.rawCall(hostileCase{method: "POST", path: path, body: buf.String(),
					contentType: "multipart/form-data; boundary=" + boundary, typed: true}, tenantKey)
				sent++
				names := j < 5 // the hostile text is a field or file name
				switch {
				case status >= 500 || status == 0:
					t.Errorf("%s parts %.80q: %d %s", path, fmt.Sprint(parts), status, body)
				case status < 400:
					t.Errorf("%s parts %.80q: accepted with %d %s", path, fmt.Sprint(parts), status, body)
				case i < 4 && names && (status != http.StatusBadRequest || !(bytes.Contains(body, []byte("NUL character")) ||
					bytes.Contains(body, []byte("not valid UTF-8")) || bytes.Contains(body, []byte("malformed MIME header")))):
					t.Errorf("%s parts %.80q: %d %s, want 400 naming the bad text", path, fmt.Sprint(parts), status, body)
				case i >= 4 && names && (status != http.StatusBadRequest || !bytes.Contains(body, []byte("too long"))):
					t.Errorf("%s parts %.80q: %d %.200s, want 400 naming the long name", path, fmt.Sprint(parts), status, body)
				}
			}
		}
	}
	if after := dbFingerprint(t, e); after != before {
		t.Errorf("refused multipart requests changed the database:\nbefore %s\nafter  %s", before, after)
	}
	t.Logf("%d multipart requests", sent)
}

// fingerprintDiff names the parts of two fingerprints that differ.
func fingerprintDiff(before, after string) string {
	b, a := strings.Fields(before), strings.Fields(after)
	var out []string
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(b) {
			x = b[i]
		}
		if i < len(a) {
			y = a[i]
		}
		if x != y {
			out = append(out, x+" -> "+y)
		}
	}
	return strings.Join(out, ", ")
}
