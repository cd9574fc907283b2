package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"studio/jobs/upstream/fakeupstream"
	"studio/rest"
)

// What integrators read is what the server accepts: every request example of rest/openapi.yaml is sent
// to a real server, in the document's order, and must get the documented success with a body that
// matches its schema (the harness validates every answer against the document). A test fixes only the
// values no document can know in advance — ids, codes and keys made by the server — and names them
// per example; everything else is sent as published. An example without a case here fails the test.

// exampleRequest is one request example of the document.
type exampleRequest struct {
	op, method, path, contentType, name string
	value                               any
}

// exampleKey names an example: its operation and its name (the content type for a single example).
func (x exampleRequest) key() string { return x.op + ":" + x.name }

// requestExamples lists the request examples of the document in its order (paths as written, methods
// in the order get, post, put, patch, delete; examples by name).
func requestExamples(t *testing.T, doc *openapi3.T, raw []byte) []exampleRequest {
	t.Helper()
	var out []exampleRequest
	for _, path := range documentPathOrder(raw) {
		item := doc.Paths.Value(path)
		for _, m := range []struct {
			name string
			op   *openapi3.Operation
		}{{"GET", item.Get}, {"POST", item.Post}, {"PUT", item.Put}, {"PATCH", item.Patch}, {"DELETE", item.Delete}} {
			if m.op == nil || m.op.RequestBody == nil || m.op.RequestBody.Value == nil {
				continue
			}
			for _, ct := range sortedContentTypes(m.op.RequestBody.Value.Content) {
				media := m.op.RequestBody.Value.Content[ct]
				short := map[string]string{"application/json": "json", "multipart/form-data": "multipart",
					"application/x-www-form-urlencoded": "form"}[ct]
				if media.Example != nil {
					out = append(out, exampleRequest{m.op.OperationID, m.name, path, ct, short, media.Example})
				}
				names := make([]string, 0, len(media.Examples))
				for n := range media.Examples {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					out = append(out, exampleRequest{m.op.OperationID, m.name, path, ct, n, media.Examples[n].Value.Value})
				}
			}
		}
	}
	return out
}

// documentPathOrder returns the paths in the order the YAML writes them.
func documentPathOrder(raw []byte) []string {
	var paths []string
	for _, m := range regexp.MustCompile(`(?m)^  (/[^:]*):\s*$`).FindAllSubmatch(raw, -1) {
		paths = append(paths, string(m[1]))
	}
	return paths
}

func sortedContentTypes(c openapi3.Content) []string {
	out := make([]string, 0, len(c))
	for ct := range c {
		out = append(out, ct)
	}
	slices.Sort(out)
	return out
}

// exampleFixtures are the values made by the server that examples stand for.
type exampleFixtures struct {
	adminTenant, tenantKey, personal, upload string
	platformTemplate, throwawayTemplate      string
	voidCode                                 string
	made                                     map[string]string // values answered by earlier examples
}

func TestEveryRequestExampleGetsTheDocumentedAnswer(t *testing.T) {
	sink, smtp := withSMTP(t)
	_, s3 := withS3(t)
	e := newEnv(t, smtp, s3)
	doc, err := rest.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fx := &exampleFixtures{made: map[string]string{}}
	fx.adminTenant, _ = e.tenant("Examples admin", 100)
	_, fx.tenantKey = e.tenant("Acme", 1000)
	e.tplCreate("/api/templates", fx.tenantKey, tplCopy("tea-copy", "xiaohongshu"))
	fx.platformTemplate = e.tplCreate("/api/templates", e.adminKey, map[string]any{"type": "image", "slug": "gift-poster",
		"zh_name": "礼品海报", "generation_configs": []any{map[string]any{"prompt_template": "a gift poster"}}})
	fx.throwawayTemplate = e.tplCreate("/api/templates", e.adminKey, map[string]any{"type": "image", "slug": "old-poster",
		"zh_name": "旧海报", "generation_configs": []any{map[string]any{"prompt_template": "an old poster"}}})
	fx.voidCode = e.call("POST", "/api/tenant-claims", fx.tenantKey, map[string]any{"template_ids": []string{fx.platformTemplate}, "credits": 1}).expect(t, 200).str("code")
	buyerCode := e.call("POST", "/api/tenant-claims", fx.tenantKey, map[string]any{"template_ids": []string{fx.platformTemplate}, "credits": 1}).expect(t, 200).str("code")
	red := e.call("POST", "/api/promo-claims", "", map[string]any{"code": buyerCode, "nickname": "buyer", "email": "buyer@example.com"}).expect(t, 200)
	fx.personal = red.str("token")
	fx.upload = e.upload(fx.tenantKey, fileField("poster.png", "image/png", fakeupstream.PNG("poster"))).expect(t, 200).str("url")

	type sent struct {
		key  string // credential
		path string // path and query
		body any
		want int
	}
	tenant := func(x exampleRequest, body map[string]any) sent { return sent{fx.tenantKey, x.path, body, 200} }
	admin := func(x exampleRequest, body map[string]any) sent { return sent{e.adminKey, x.path, body, 200} }
	public := func(x exampleRequest, body map[string]any) sent { return sent{"", x.path, body, 200} }
	set := func(f func(exampleRequest, map[string]any) sent, values func() map[string]any) func(exampleRequest, map[string]any) sent {
		return func(x exampleRequest, body map[string]any) sent {
			for k, v := range values() {
				if _, ok := body[k]; !ok {
					t.Errorf("%s: the example has no %q to fill", x.key(), k)
				}
				body[k] = v
			}
			return f(x, body)
		}
	}
	fixed := func(kv ...any) func() map[string]any {
		return func() map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				switch v := kv[i+1].(type) {
				case func() string:
					m[kv[i].(string)] = v()
				default:
					m[kv[i].(string)] = v
				}
			}
			return m
		}
	}
	made := func(name string) func() string { return func() string { return fx.made[name] } }
	device := func() string {
		start := e.call("POST", "/api/auth/device", "", nil).expect(t, 200)
		var userID string
		if u, err := e.app.Accounts().UserByEmail(context.Background(), "buyer@example.com"); err == nil {
			userID = u.ID
		}
		if err := e.app.Auth().DecideDevice(context.Background(), start.str("user_code"), userID, true); err != nil {
			t.Fatal(err)
		}
		return start.str("device_code")
	}
	cases := map[string]func(exampleRequest, map[string]any) sent{
		"runAdminAction:tenant-create":       admin,
		"runAdminAction:tenant-credit":       set(admin, fixed("tenant_id", fx.adminTenant)),
		"runAdminAction:tenant-rekey":        set(admin, fixed("tenant_id", fx.adminTenant)),
		"runAdminAction:tenant-bind":         set(admin, fixed("tenant_id", fx.adminTenant)),
		"runAdminAction:user-credit":         admin,
		"runAdminAction:invitation-create":   admin,
		"runAdminAction:upstream-list":       admin,
		"runAdminAction:upstream-disable":    admin,
		"runAdminAction:upstream-enable":     admin,
		"runAdminAction:promo-claim-disable": set(admin, fixed("code", fx.voidCode)),
		"runAdminAction:template-delete":     set(admin, fixed("id", fx.throwawayTemplate)),
		"manageTenantAccount:json":           tenant,
		"createTemplate:json":                tenant,
		"updateTemplate:json":                set(tenant, fixed("id", made("createTemplate"))),
		"createVideoTemplate:json":           tenant,
		"updateVideoTemplate:json":           set(tenant, fixed("id", made("createVideoTemplate"))),
		"upsertTemplateHook:json":            tenant,
		"updateTemplateHook:json":            set(tenant, fixed("id", made("upsertTemplateHook"))),
		"deleteTemplateHook:json":            set(tenant, fixed("id", made("upsertTemplateHook"))),
		"generateImage:json":                 tenant,
		"generateImageBatch:json":            tenant,
		"imageToTemplate:json":               set(tenant, fixed("image_url", fx.upload)),
		"uploadRef:multipart":                tenant,
		"presignUpload:json":                 tenant,
		"commitUpload:json":                  set(tenant, fixed("key", made("presignUpload"))),
		"createVideo:json":                   tenant,
		"generateArticle:json":               tenant,
		"reverseImage:json":                  set(tenant, fixed("image_url", fx.upload)),
		"reverseImage:multipart":             tenant,
		"createChatCompletion:json":          tenant,
		"agentChat:json":                     tenant,
		"sendRegisterCode:json":              public,
		"register:json": set(public, fixed("code", func() string { return sink.lastCode(t, "ann@example.com") },
			"invitation_code", func() string { return e.invitation() })),
		"login:json": public,
		"changePassword:json": func(x exampleRequest, body map[string]any) sent {
			return sent{fx.made["login"], x.path, body, 200}
		},
		"pollDeviceToken:json":   set(public, fixed("device_code", device)),
		"pollDeviceToken:form":   set(public, fixed("device_code", device)),
		"createTenantClaim:json": set(tenant, fixed("template_ids", func() any { return []string{fx.platformTemplate} }())),
		"redeemPromoClaim:json":  set(public, fixed("code", made("createTenantClaim"))),
	}

	examples := requestExamples(t, doc, raw)
	if len(examples) < 30 {
		t.Fatalf("found %d request examples; the walk of the document is broken", len(examples))
	}
	for _, x := range examples {
		prepare, ok := cases[x.key()]
		if !ok {
			t.Errorf("request example %s (%s %s) has no case in this test: add the fixtures it needs", x.key(), x.method, x.path)
			continue
		}
		body, _ := x.value.(map[string]any)
		if body == nil {
			t.Errorf("%s: the example is not a JSON object", x.key())
			continue
		}
		body = cloneJSON(body)
		s := prepare(x, body)
		var r *resp
		switch x.contentType {
		case "application/json":
			r = e.call(x.method, s.path, s.key, s.body)
		case "application/x-www-form-urlencoded":
			form := url.Values{}
			for k, v := range s.body.(map[string]any) {
				form.Set(k, fmt.Sprint(v))
			}
			r = e.callH(x.method, s.path, map[string]string{"X-API-Key": s.key, "Content-Type": x.contentType}, []byte(form.Encode()))
		case "multipart/form-data":
			var fields []formField
			for k, v := range s.body.(map[string]any) {
				if k == "file" {
					fields = append(fields, fileField("poster.png", "image/png", fakeupstream.PNG("example")))
				} else {
					fields = append(fields, formField{name: k, data: []byte(fmt.Sprint(v))})
				}
			}
			mb, ct := multipartBody(t, fields...)
			r = e.callH(x.method, s.path, map[string]string{"X-API-Key": s.key, "Content-Type": ct}, mb)
		default:
			t.Errorf("%s: no way to send %s", x.key(), x.contentType)
			continue
		}
		if r.Status != s.want {
			t.Errorf("%s: %s %s with the published example = %d, want %d: %s", x.key(), x.method, x.path, r.Status, s.want, truncate(r.Body))
			continue
		}
		remember(fx.made, x, r)
		if x.op == "presignUpload" && r.JSON["upload"] == nil {
			t.Fatalf("presign answered %s", r.Body)
		}
		if x.op == "presignUpload" {
			// The client's part between presign and commit: the signed PUT of a file of the declared size.
			size := int(s.body.(map[string]any)["size"].(float64))
			if status := put(t, r, padded(sampleMP4(), size), nil); status != 200 {
				t.Errorf("%s: the signed PUT = %d (answer %s)", x.key(), status, truncate(r.Body))
			}
		}
	}
}

// remember keeps what later examples name: the id a creation answered, a presigned key, a login token.
func remember(made map[string]string, x exampleRequest, r *resp) {
	switch x.op {
	case "createTemplate", "createVideoTemplate":
		made[x.op] = r.JSON["template"].(map[string]any)["id"].(string)
	case "upsertTemplateHook":
		made[x.op] = r.JSON["hook"].(map[string]any)["id"].(string)
	case "presignUpload":
		if up, ok := r.JSON["upload"].(map[string]any); ok {
			made[x.op], _ = up["key"].(string)
		}
		if k, ok := r.JSON["key"].(string); ok {
			made[x.op] = k
		}
	case "createTenantClaim":
		made[x.op] = r.str("code")
	case "login":
		made[x.op] = r.str("token")
	}
}

func cloneJSON(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// TestEveryResponseExampleMatchesItsSchema: the response examples of the document (operations and
// shared responses) are valid under the schemas they illustrate.
func TestEveryResponseExampleMatchesItsSchema(t *testing.T) {
	doc, err := rest.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	check := func(where string, media *openapi3.MediaType) {
		if media == nil || media.Schema == nil || media.Schema.Value == nil {
			return
		}
		values := map[string]any{}
		if media.Example != nil {
			values["example"] = media.Example
		}
		for name, ex := range media.Examples {
			if ex.Value != nil {
				values[name] = ex.Value.Value
			}
		}
		for name, v := range values {
			n++
			if err := media.Schema.Value.VisitJSON(v); err != nil {
				t.Errorf("%s, example %s does not match its schema: %v", where, name, err)
			}
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, r := range op.Responses.Map() {
				if r.Value == nil {
					continue
				}
				for ct, media := range r.Value.Content {
					check(fmt.Sprintf("%s %s -> %s (%s)", method, path, status, ct), media)
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for ct, media := range op.RequestBody.Value.Content {
					if strings.HasPrefix(ct, "application/json") {
						check(fmt.Sprintf("%s %s request (%s)", method, path, ct), media)
					}
				}
			}
		}
	}
	for name, r := range doc.Components.Responses {
		if r.Value != nil {
			for ct, media := range r.Value.Content {
				check("response "+name+" ("+ct+")", media)
			}
		}
	}
	if n == 0 {
		t.Fatal("no example found: the walk of the document is broken")
	}
}

// TestAdminActionsAreDocumented: every administrator action the server runs is one branch of the
// document's POST /api/admin body, with its fields, their types and which are required; and the
// document describes no action the server does not run.
func TestAdminActionsAreDocumented(t *testing.T) {
	e := newEnv(t)
	doc, err := rest.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	body := doc.Paths.Value("/api/admin").Post.RequestBody.Value.Content["application/json"].Schema.Value
	documented := map[string]*openapi3.Schema{}
	for _, alt := range body.OneOf {
		s := alt.Value
		action := s.Properties["action"]
		if action == nil || len(action.Value.Enum) != 1 {
			t.Fatalf("a branch of the admin body without one action name: %v", alt.Ref)
		}
		name := action.Value.Enum[0].(string)
		documented[name] = s
		if body.Discriminator == nil || body.Discriminator.Mapping[name] != alt.Ref {
			t.Errorf("action %s: the discriminator does not map it to %s", name, alt.Ref)
		}
	}
	types := map[string]string{"string": "string", "int": "integer", "bool": "boolean", "float": "number"}
	for _, a := range e.app.Admin.List() {
		s, ok := documented[a.Name]
		if !ok {
			t.Errorf("action %s is not in rest/openapi.yaml", a.Name)
			continue
		}
		delete(documented, a.Name)
		want := map[string]bool{"action": true}
		required := []string{"action"}
		for _, p := range a.Params {
			want[p.Name] = true
			prop := s.Properties[p.Name]
			if prop == nil {
				t.Errorf("action %s: field %s is not documented", a.Name, p.Name)
				continue
			}
			if !prop.Value.Type.Is(types[p.Type]) {
				t.Errorf("action %s: field %s is documented as %v, the server reads %s", a.Name, p.Name, prop.Value.Type, p.Type)
			}
			if p.Required {
				required = append(required, p.Name)
			}
		}
		for name := range s.Properties {
			if !want[name] {
				t.Errorf("action %s: the document names a field %s the server does not read", a.Name, name)
			}
		}
		slices.Sort(required)
		got := slices.Clone(s.Required)
		slices.Sort(got)
		if !slices.Equal(got, required) {
			t.Errorf("action %s: required %v, the server requires %v", a.Name, got, required)
		}
	}
	for name := range documented {
		t.Errorf("the document describes an action %s the server does not run", name)
	}
}
