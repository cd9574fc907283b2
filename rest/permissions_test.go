package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"studio/models"
	"studio/rest"
)

// The identity-by-route test: every REST operation of the OpenAPI document, every GraphQL field and every
// console page is called with each identity kind, and the answer is compared with the one permission table
// (models.Capability, models.Identity.May). The tables below say which capability each entry point needs;
// they are the test's expectation, written once, and the test fails when an entry point is missing here.

// public marks an entry point that needs no credential; anyone marks one open to every valid credential.
const (
	public models.Capability = "(public)"
	anyone models.Capability = "(any identity)"
)

// restNeeds is the capability of every operation of rest/openapi.yaml.
var restNeeds = map[string]models.Capability{
	"GET /api/health":              public,
	"GET /api/ready":               public,
	"GET /api/cli-guide":           public,
	"GET /api/doc-contracts":       public,
	"GET /api/openapi.json":        public,
	"GET /metrics":                 models.CapAdminister,
	"POST /api/admin":              models.CapAdminister,
	"GET /api/balance":             models.CapGenerate,
	"GET /api/tenant-pool":         models.CapTenantReports,
	"GET /api/tenant-stats":        models.CapTenantReports,
	"GET /api/tenant-usage":        models.CapTenantReports,
	"GET /api/tenant-accounts":     models.CapManageMembers,
	"POST /api/tenant-accounts":    models.CapManageMembers,
	"GET /api/templates":           models.CapReadTemplates,
	"POST /api/templates":          models.CapWriteTemplates,
	"PATCH /api/templates":         models.CapWriteTemplates,
	"GET /api/video-templates":     models.CapReadTemplates,
	"POST /api/video-templates":    models.CapWriteTemplates,
	"PATCH /api/video-templates":   models.CapWriteTemplates,
	"GET /api/skills":              models.CapReadTemplates,
	"GET /api/template-hooks":      models.CapHooks,
	"POST /api/template-hooks":     models.CapHooks,
	"PATCH /api/template-hooks":    models.CapHooks,
	"DELETE /api/template-hooks":   models.CapHooks,
	"POST /api/generate":           models.CapGenerate,
	"POST /api/generate-batch":     models.CapGenerate,
	"GET /api/jobs":                models.CapGenerate,
	"POST /api/image-to-template":  models.CapImageToTemplate,
	"POST /api/upload-ref":         models.CapGenerate,
	"POST /api/upload-ref/presign": models.CapGenerate,
	"POST /api/upload-ref/commit":  models.CapGenerate,
	"POST /api/videos":             models.CapGenerate,
	"GET /api/videos":              models.CapGenerate,
	"DELETE /api/videos":           models.CapGenerate,
	"POST /api/article":            models.CapGenerate,
	"POST /api/reverse":            models.CapGenerate,
	"POST /api/chat/completions":   models.CapGenerate,
	"POST /api/chat":               models.CapGenerate,
	"GET /api/models":              models.CapListModels,
	"GET /api/models/{model}":      models.CapListModels,
	"GET /api/available-models":    models.CapListModels,
	"POST /api/auth/register/code": public,
	"POST /api/auth/register":      public,
	"POST /api/auth/login":         public,
	"POST /api/auth/password":      models.CapOwnAccount,
	"GET /api/whoami":              models.CapOwnAccount,
	"GET /api/auth/oidc/start":     public,
	"GET /api/auth/oidc/callback":  public,
	"POST /api/auth/device":        public,
	"POST /api/auth/device/token":  public,
	"POST /api/tenant-claims":      models.CapClaimCodes,
	"GET /api/promo-claims":        public,
	"POST /api/promo-claims":       public,
	"GET /api/claims":              models.CapClaims,
}

// graphNeeds is the capability of every field of the GraphQL schema's Query, Mutation and Subscription.
var graphNeeds = map[string]models.Capability{
	"Query.me":                     anyone,
	"Query.balance":                models.CapGenerate,
	"Query.tenantPool":             models.CapTenantReports,
	"Query.tenantStats":            models.CapTenantReports,
	"Query.tenantUsage":            models.CapTenantReports,
	"Query.accounts":               models.CapManageMembers,
	"Query.job":                    models.CapGenerate,
	"Query.jobs":                   models.CapGenerate,
	"Query.availableModels":        models.CapListModels,
	"Query.templates":              models.CapReadTemplates,
	"Query.videoTemplates":         models.CapReadTemplates,
	"Query.skills":                 models.CapReadTemplates,
	"Query.templateHooks":          models.CapHooks,
	"Query.videoTask":              models.CapGenerate,
	"Query.videoTasks":             models.CapGenerate,
	"Mutation.createClaim":         models.CapClaimCodes,
	"Mutation.createAccount":       models.CapManageMembers,
	"Mutation.setAccountQuota":     models.CapManageMembers,
	"Mutation.rekeyAccount":        models.CapManageMembers,
	"Mutation.toggleAccount":       models.CapManageMembers,
	"Mutation.generate":            models.CapGenerate,
	"Mutation.generateBatch":       models.CapGenerate,
	"Mutation.imageToTemplate":     models.CapImageToTemplate,
	"Mutation.createTemplate":      models.CapWriteTemplates,
	"Mutation.updateTemplate":      models.CapWriteTemplates,
	"Mutation.createVideoTemplate": models.CapWriteTemplates,
	"Mutation.updateVideoTemplate": models.CapWriteTemplates,
	"Mutation.upsertTemplateHook":  models.CapHooks,
	"Mutation.updateTemplateHook":  models.CapHooks,
	"Mutation.deleteTemplateHook":  models.CapHooks,
	"Mutation.submitVideo":         models.CapGenerate,
	"Mutation.cancelVideo":         models.CapGenerate,
	"Subscription.jobProgress":     models.CapGenerate,
	"Subscription.jobs":            models.CapGenerate,
	"Subscription.videoProgress":   models.CapGenerate,
}

// consoleNeeds is the capability of every page and form of the browser console ({id} is filled in).
var consoleNeeds = map[string]models.Capability{
	"GET /console":                          models.CapGenerate,
	"GET /console/jobs":                     models.CapGenerate,
	"POST /console/jobs":                    models.CapGenerate,
	"GET /console/jobs/events":              models.CapGenerate,
	"GET /console/hooks":                    models.CapHooks,
	"POST /console/hooks":                   models.CapHooks,
	"POST /console/hooks/{id}":              models.CapHooks,
	"GET /console/members":                  models.CapManageMembers,
	"POST /console/members":                 models.CapManageMembers,
	"POST /console/members/{id}":            models.CapManageMembers,
	"GET /console/claims":                   models.CapClaimCodes,
	"POST /console/claims":                  models.CapClaimCodes,
	"GET /console/settings":                 models.CapTenantSettings,
	"GET /console/templates":                models.CapReadTemplates,
	"GET /console/templates/field-row":      models.CapWriteTemplates,
	"GET /console/templates/new":            models.CapWriteTemplates,
	"POST /console/templates/new":           models.CapWriteTemplates,
	"GET /console/templates/{id}":           models.CapWriteTemplates,
	"POST /console/templates/{id}":          models.CapWriteTemplates,
	"POST /console/templates/{id}/samples":  models.CapWriteTemplates,
	"POST /console/templates/{id}/preview":  models.CapReadTemplates,
	"GET /admin":                            models.CapAdminister,
	"POST /admin/tenants":                   models.CapAdminister,
	"POST /admin/tenants/{id}":              models.CapAdminister,
	"GET /admin/upstreams":                  models.CapAdminister,
	"POST /admin/upstreams/{id}":            models.CapAdminister,
	"GET /admin/claims":                     models.CapAdminister,
	"POST /admin/claims/{id}":               models.CapAdminister,
	"GET /admin/invitations":                models.CapAdminister,
	"POST /admin/invitations":               models.CapAdminister,
	"GET /admin/templates":                  models.CapAdminister,
	"GET /admin/templates/field-row":        models.CapAdminister,
	"GET /admin/templates/new":              models.CapAdminister,
	"POST /admin/templates/new":             models.CapAdminister,
	"GET /admin/templates/{id}":             models.CapAdminister,
	"POST /admin/templates/{id}":            models.CapAdminister,
	"POST /admin/templates/{id}/samples":    models.CapAdminister,
	"POST /admin/templates/{id}/preview":    models.CapAdminister,
	"POST /logout":                          anyone,
	"GET " + models.DeviceVerificationPath:  public,
	"GET /login":                            public,
	"GET /login/code":                       public,
	"GET /claim/{id}":                       public,
	"POST /claim/{id}":                      public,
	"POST /claim/{id}/password":             public,
	"POST " + models.DeviceVerificationPath: public,
	"POST /login":                           public,
	"POST /login/code":                      public,
	"GET /":                                 public,
}

// caller is one identity of each kind, as a credential (REST, GraphQL) and as a console session.
type caller struct {
	kind       models.IdentityKind
	credential string
	cookie     string
	csrf       string
}

// callers makes one identity of each kind: tenant key, member account key, personal login, administrator.
func (e *env) callers(t *testing.T) []caller {
	t.Helper()
	_, tenantKey := e.tenant("Matrix", 1000)
	created := e.call("POST", "/api/tenant-accounts", tenantKey, map[string]any{"action": "create", "email": "m@matrix.test", "nickname": "M"}).expect(t, 200)
	accountKey := created.JSON["account"].(map[string]any)["api_key"].(string)
	userID, login := e.personalLogin("matrix@example.com", 1000)
	out := []caller{
		{kind: models.IdentityTenant, credential: tenantKey},
		{kind: models.IdentityAccount, credential: accountKey},
		{kind: models.IdentityUser, credential: login},
		{kind: models.IdentityAdmin, credential: e.adminKey},
	}
	ctx := context.Background()
	for i := range out {
		var cookie string
		var err error
		if out[i].kind == models.IdentityUser {
			cookie, err = e.app.Auth().StartUserSession(ctx, userID)
		} else {
			cookie, err = e.app.Auth().StartKeySession(ctx, out[i].credential, "127.0.0.1")
		}
		if err != nil {
			t.Fatalf("console session of %s: %v", out[i].kind, err)
		}
		sess, err := e.app.Auth().ResolveSession(ctx, cookie)
		if err != nil {
			t.Fatal(err)
		}
		out[i].cookie, out[i].csrf = cookie, sess.CSRF
	}
	return out
}

// allowed is what the permission table says of an identity kind and an entry point's capability.
func allowed(kind models.IdentityKind, need models.Capability) bool {
	if need == anyone || need == public {
		return true
	}
	return (&models.Identity{Kind: kind}).May(need)
}

// TestIdentityByRoute walks every REST operation, GraphQL field and console page with each identity kind
// and with no credential, and compares the answer with the permission table: an identity the table
// admits is never refused (401/403), any other gets 403, and no credential gets 401 (the console: a
// redirect to sign in).
func TestIdentityByRoute(t *testing.T) {
	e := newEnv(t, withVar("SERVICE_GENERATE_RATE", "1000000"), withVar("SERVICE_UPLOAD_RATE", "1000000"))
	e.skipSpec = true // sample bodies are schema-shaped, but the answers are not the point here
	callers := e.callers(t)
	t.Run("REST", func(t *testing.T) { walkREST(t, e, callers) })
	t.Run("GraphQL", func(t *testing.T) { walkGraphQL(t, e, callers) })
	t.Run("console", func(t *testing.T) { walkConsole(t, e, callers) })
}

func walkREST(t *testing.T, e *env, callers []caller) {
	doc, err := rest.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	pathParam := regexp.MustCompile(`\{[^}]+\}`)
	seen := map[string]bool{}
	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	checked := 0
	for _, p := range paths {
		for method, op := range doc.Paths.Value(p).Operations() {
			name := method + " " + p
			seen[name] = true
			need, ok := restNeeds[name]
			if !ok {
				t.Errorf("%s: not in the identity-by-route table (restNeeds): add it with the capability it needs", name)
				continue
			}
			body := ""
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
					body = sample(mt.Schema.Value, 0).String()
				}
			}
			c := hostileCase{method: method, path: pathParam.ReplaceAllString(p, models.NewID()), body: body}
			if need != public {
				if status, b := e.rawCall(c, ""); status != http.StatusUnauthorized {
					t.Errorf("%s without a credential: %d %.200s, want 401", name, status, b)
				}
			}
			for _, who := range callers {
				status, b := e.rawCall(c, who.credential)
				checked++
				switch {
				case need == public && status == http.StatusForbidden:
					t.Errorf("%s as %s: %d %.200s; a public operation refuses no identity", name, who.kind, status, b)
				case need == public: // it reads no credential: sign-in answers 401 for a wrong password
				case allowed(who.kind, need) && (status == http.StatusUnauthorized || status == http.StatusForbidden):
					t.Errorf("%s as %s: %d %.200s; the table lets %s %s", name, who.kind, status, b, who.kind, need)
				case !allowed(who.kind, need) && status != http.StatusForbidden:
					t.Errorf("%s as %s: %d %.200s, want 403 (%s needs %s)", name, who.kind, status, b, name, need)
				}
			}
		}
	}
	for name := range restNeeds {
		if !seen[name] {
			t.Errorf("%s is in restNeeds but not in rest/openapi.yaml", name)
		}
	}
	t.Logf("%d REST operations, %d calls", len(seen), checked)
}

// gqlType is a type reference of the introspection answer.
type gqlType struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	OfType *gqlType `json:"ofType"`
}

type gqlInput struct {
	Name         string  `json:"name"`
	Type         gqlType `json:"type"`
	DefaultValue *string `json:"defaultValue"`
}

type gqlFullType struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Fields []struct {
		Name string     `json:"name"`
		Args []gqlInput `json:"args"`
		Type gqlType    `json:"type"`
	} `json:"fields"`
	InputFields []gqlInput `json:"inputFields"`
	EnumValues  []struct {
		Name string `json:"name"`
	} `json:"enumValues"`
}

const introspection = `{ __schema { queryType { name } mutationType { name } subscriptionType { name }
  types { kind name
    fields { name type { ...T } args { name defaultValue type { ...T } } }
    inputFields { name defaultValue type { ...T } }
    enumValues { name } } } }
fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } }`

// gqlPost sends one GraphQL operation over HTTP and returns the codes of its errors.
func gqlPost(t *testing.T, e *env, credential, query string) []string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequest("POST", e.srv.URL+"/graphql", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %d %.300s", query, res.StatusCode, raw)
	}
	var codes []string
	for _, e := range out.Errors {
		code, _ := e.Extensions["code"].(string)
		codes = append(codes, code+": "+e.Message)
	}
	return codes
}

// refusedWith reports whether one of the error codes is code.
func refusedWith(codes []string, code string) bool {
	for _, c := range codes {
		if strings.HasPrefix(c, code+":") {
			return true
		}
	}
	return false
}

func walkGraphQL(t *testing.T, e *env, callers []caller) {
	body, _ := json.Marshal(map[string]any{"query": introspection})
	res, err := http.Post(e.srv.URL+"/graphql", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Data struct {
			Schema struct {
				QueryType, MutationType, SubscriptionType struct{ Name string }
				Types                                     []gqlFullType
			} `json:"__schema"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&schema); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	types := map[string]gqlFullType{}
	for _, ty := range schema.Data.Schema.Types {
		types[ty.Name] = ty
	}
	s := schema.Data.Schema
	seen := map[string]bool{}
	checked := 0
	for _, root := range []struct{ op, typ string }{{"query", s.QueryType.Name}, {"mutation", s.MutationType.Name}, {"subscription", s.SubscriptionType.Name}} {
		if root.typ == "" {
			continue
		}
		for _, f := range types[root.typ].Fields {
			name := root.typ + "." + f.Name
			seen[name] = true
			need, ok := graphNeeds[name]
			if !ok {
				t.Errorf("%s: not in the identity-by-route table (graphNeeds): add it with the capability it needs", name)
				continue
			}
			var args []string
			for _, a := range f.Args {
				if a.Type.Kind == "NON_NULL" && a.DefaultValue == nil {
					args = append(args, a.Name+": "+gqlValue(types, a.Type))
				}
			}
			field := f.Name
			if len(args) > 0 {
				field += "(" + strings.Join(args, ", ") + ")"
			}
			if k := unwrap(f.Type); k.Kind == "OBJECT" || k.Kind == "INTERFACE" || k.Kind == "UNION" {
				field += " { __typename }"
			}
			query := root.op + " { " + field + " }"
			call := func(credential string) []string {
				if root.op == "subscription" {
					return wsSubscribe(t, e, credential, query)
				}
				return gqlPost(t, e, credential, query)
			}
			if codes := call(""); !refusedWith(codes, "UNAUTHENTICATED") {
				t.Errorf("%s without a credential: %v, want UNAUTHENTICATED", name, codes)
			}
			for _, who := range callers {
				codes := call(who.credential)
				checked++
				refused := refusedWith(codes, "FORBIDDEN") || refusedWith(codes, "UNAUTHENTICATED")
				switch {
				case allowed(who.kind, need) && refused:
					t.Errorf("%s as %s: %v; the table lets %s %s", query, who.kind, codes, who.kind, need)
				case !allowed(who.kind, need) && !refusedWith(codes, "FORBIDDEN"):
					t.Errorf("%s as %s: %v, want FORBIDDEN (%s needs %s)", query, who.kind, codes, name, need)
				}
			}
		}
	}
	for name := range graphNeeds {
		if !seen[name] {
			t.Errorf("%s is in graphNeeds but not in the GraphQL schema", name)
		}
	}
	t.Logf("%d GraphQL fields, %d calls", len(seen), checked)
}

// unwrap returns the named type under NON_NULL and LIST.
func unwrap(t gqlType) gqlType {
	for t.OfType != nil && (t.Kind == "NON_NULL" || t.Kind == "LIST") {
		t = *t.OfType
	}
	return t
}

// gqlValue writes a literal of the type: required fields of input objects, the first enum value, one list element.
func gqlValue(types map[string]gqlFullType, t gqlType) string {
	switch t.Kind {
	case "NON_NULL":
		return gqlValue(types, *t.OfType)
	case "LIST":
		return "[" + gqlValue(types, *t.OfType) + "]"
	case "ENUM":
		return types[t.Name].EnumValues[0].Name
	case "INPUT_OBJECT":
		var fields []string
		for _, f := range types[t.Name].InputFields {
			if f.Type.Kind == "NON_NULL" && f.DefaultValue == nil {
				fields = append(fields, f.Name+": "+gqlValue(types, f.Type))
			}
		}
		return "{" + strings.Join(fields, ", ") + "}"
	}
	switch t.Name {
	case "Int":
		return "1"
	case "Float":
		return "1.5"
	case "Boolean":
		return "false"
	case "ID":
		return `"` + models.NewID() + `"`
	case "JSON", "StringMap":
		return "{}"
	}
	return `"matrix"`
}

// wsSubscribe starts one subscription over graphql-transport-ws and returns the codes of the errors that
// refused it: a connection closed with 4401 is UNAUTHENTICATED, with 4403 FORBIDDEN; nothing within 1.5 s
// means it runs.
func wsSubscribe(t *testing.T, e *env, credential, query string) []string {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second}
	conn, _, err := d.Dial("ws"+strings.TrimPrefix(e.srv.URL, "http")+"/graphql", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload := map[string]any{}
	if credential != "" {
		payload["Authorization"] = "Bearer " + credential
	}
	_ = conn.WriteJSON(map[string]any{"type": "connection_init", "payload": payload})
	_ = conn.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query}})
	_ = conn.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
	for {
		var msg struct {
			Type    string `json:"type"`
			Payload json.RawMessage
		}
		if err := conn.ReadJSON(&msg); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				switch ce.Code {
				case 4401:
					return []string{"UNAUTHENTICATED: " + ce.Text}
				case 4403:
					return []string{"FORBIDDEN: " + ce.Text}
				}
				return []string{fmt.Sprintf("CLOSED: %d %s", ce.Code, ce.Text)}
			}
			return nil // nothing refused it within the time: the subscription runs
		}
		switch msg.Type {
		case "next", "complete":
			return nil
		case "error":
			var errs []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			}
			_ = json.Unmarshal(msg.Payload, &errs)
			var codes []string
			for _, e := range errs {
				code, _ := e.Extensions["code"].(string)
				codes = append(codes, code+": "+e.Message)
			}
			return codes
		}
	}
}

func walkConsole(t *testing.T, e *env, callers []caller) {
	noRedirect := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	names := make([]string, 0, len(consoleNeeds))
	for name := range consoleNeeds {
		names = append(names, name)
	}
	sort.Strings(names)
	checked := 0
	for _, name := range names {
		need := consoleNeeds[name]
		method, path, _ := strings.Cut(name, " ")
		path = strings.ReplaceAll(path, "{id}", models.NewID())
		send := func(who *caller) (int, string) {
			var body io.Reader
			if method == http.MethodPost {
				form := url.Values{}
				if who != nil {
					form.Set("csrf", who.csrf)
				}
				body = strings.NewReader(form.Encode())
			}
			req, _ := http.NewRequest(method, e.srv.URL+path, body)
			if body != nil {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			if who != nil {
				req.AddCookie(&http.Cookie{Name: models.SessionCookie, Value: who.cookie})
			}
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
				return res.StatusCode, "(event stream)" // it runs until the client leaves
			}
			b, _ := io.ReadAll(io.LimitReader(res.Body, 2048))
			return res.StatusCode, res.Header.Get("Location") + " " + string(b)
		}
		if need == public {
			continue // sign-in, claim and device pages: their own tests cover them
		}
		if status, loc := send(nil); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/login") {
			t.Errorf("%s signed out: %d %.100s, want a redirect to /login", name, status, loc)
		}
		for i := range callers {
			who := &callers[i]
			status, b := send(who)
			checked++
			switch {
			case allowed(who.kind, need) && (status == http.StatusForbidden || status == http.StatusUnauthorized):
				t.Errorf("%s as %s: %d %.200s; the table lets %s %s", name, who.kind, status, b, who.kind, need)
			case !allowed(who.kind, need) && status != http.StatusForbidden:
				t.Errorf("%s as %s: %d %.200s, want 403 (%s needs %s)", name, who.kind, status, b, name, need)
			}
		}
	}
	t.Logf("%d console pages and forms, %d calls", len(names), checked)
}
