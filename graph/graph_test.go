package graph_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"studio/graph"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
)

// waitDone polls the REST job until it ends.
func (e *env) waitDone(key, jobID string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_, j := e.rest("GET", "/api/jobs?id="+jobID, key, nil)
		if j["status"] == "done" || j["status"] == "failed" {
			return j
		}
		time.Sleep(30 * time.Millisecond)
	}
	e.t.Fatalf("job %s did not end", jobID)
	return nil
}

const jobFields = `jobId status progress cdnUrl error templateId steps { name status } createdAt updatedAt`

// restShape renames a GraphQL job to the REST field names, dropping what REST omits when empty, so that
// the two answers can be compared as they are.
func restShape(g map[string]any) map[string]any {
	out := map[string]any{"ok": true}
	names := map[string]string{"cdnUrl": "cdn_url", "templateId": "template_id", "createdAt": "created_at", "updatedAt": "updated_at"}
	for k, v := range g {
		if n, ok := names[k]; ok {
			k = n
		}
		if v == nil && k != "error" {
			continue // REST omits absent cdn_url, template_id and steps
		}
		out[k] = v
	}
	return out
}

func TestRESTAndGraphQLAgreeOnAJob(t *testing.T) {
	fake, opt := fakeUpstreams(t, 0, false)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 10)
	done := e.generate(key, map[string]any{"prompt": "a red fox"})
	e.waitDone(key, done)
	fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.ServerError})
	failed := e.generate(key, map[string]any{"prompt": "will fail"})
	if j := e.waitDone(key, failed); j["status"] != "failed" {
		t.Fatalf("job = %v, want failed", j)
	}
	for _, jobID := range []string{done, failed} {
		_, restJob := e.rest("GET", "/api/jobs?id="+jobID, key, nil)
		gq := e.gql(key, `query($id: ID!) { job(id: $id) { `+jobFields+` } }`, map[string]any{"id": jobID}).must(t)
		got := restShape(gq["job"].(map[string]any))
		if !reflect.DeepEqual(got, restJob) {
			t.Fatalf("job %s:\nGraphQL %v\nREST    %v", jobID, got, restJob)
		}
	}
	// The listing pages agree too, cursor included.
	_, restPage := e.rest("GET", "/api/jobs?limit=1", key, nil)
	gq := e.gql(key, `{ jobs(first: 1) { edges { node { `+jobFields+` } cursor } pageInfo { hasNextPage endCursor } } }`, nil).must(t)
	conn := gq["jobs"].(map[string]any)
	edges := conn["edges"].([]any)
	restJobs := restPage["jobs"].([]any)
	if len(edges) != 1 || len(restJobs) != 1 {
		t.Fatalf("edges %v, REST jobs %v", edges, restJobs)
	}
	node := restShape(edges[0].(map[string]any)["node"].(map[string]any))
	delete(node, "ok")
	if !reflect.DeepEqual(node, restJobs[0]) {
		t.Fatalf("first page:\nGraphQL %v\nREST    %v", node, restJobs[0])
	}
	info := conn["pageInfo"].(map[string]any)
	if info["hasNextPage"] != true || info["endCursor"] != restPage["next_cursor"] || edges[0].(map[string]any)["cursor"] != restPage["next_cursor"] {
		t.Fatalf("pageInfo %v, cursor %v; REST next_cursor %v", info, edges[0].(map[string]any)["cursor"], restPage["next_cursor"])
	}
	next := e.gql(key, `query($after: String) { jobs(first: 1, after: $after) { edges { node { jobId } } pageInfo { hasNextPage endCursor } } }`,
		map[string]any{"after": info["endCursor"]}).must(t)
	page2 := next["jobs"].(map[string]any)
	if page2["pageInfo"].(map[string]any)["hasNextPage"] != false || len(page2["edges"].([]any)) != 1 {
		t.Fatalf("second page = %v", page2)
	}
}

func TestErrorCodesAndPermissions(t *testing.T) {
	e := newEnv(t, upstreams(t, 0, false))
	_, key := e.tenant("Acme", 1)
	_, otherKey := e.tenant("Other", 5)
	_, poorKey := e.tenant("Poor", 0)
	member := e.member(key, "m@example.com")
	otherJob := e.generate(otherKey, map[string]any{"prompt": "x"})

	cases := []struct {
		name, key, query string
		vars             map[string]any
		code             string
		message          string
	}{
		{"no credential", "", `{ balance { credits } }`, nil, "UNAUTHENTICATED", "missing credentials"},
		{"unknown key", "sk-studio-AAAAAAAAAAAAAAAAAAAAAAAA", `{ balance { credits } }`, nil, "UNAUTHENTICATED", "invalid API key"},
		{"member key on tenantPool", member, `{ tenantPool { balance } }`, nil, "FORBIDDEN", "a member account key cannot read the tenant's pool, statistics or usage; use the tenant key"},
		{"member key on accounts", member, `{ accounts { id } }`, nil, "FORBIDDEN", ""},
		{"member key on tenantStats", member, `{ tenantStats { windowHours } }`, nil, "FORBIDDEN", ""},
		{"member key creates a template", member, `mutation { createTemplate(input: {type: image, zhName: "x", generationConfigs: []}) { id } }`, nil, "FORBIDDEN", ""},
		{"member key on hooks", member, `{ templateHooks { id } }`, nil, "FORBIDDEN", ""},
		{"administrator key generates", e.adminKey, generateMutation, map[string]any{"input": map[string]any{"prompt": "x"}}, "FORBIDDEN", "administrator key"},
		{"administrator key balance", e.adminKey, `{ balance { credits } }`, nil, "FORBIDDEN", ""},
		{"another tenant's job", key, `query($id: ID!) { job(id: $id) { jobId } }`, map[string]any{"id": otherJob}, "NOT_FOUND", "job not found"},
		{"another tenant's account", key, `mutation($id: ID!) { rekeyAccount(accountId: $id) { apiKey } }`, map[string]any{"id": models.NewID()}, "NOT_FOUND", ""},
		{"nothing to generate", key, generateMutation, map[string]any{"input": map[string]any{"ratio": "1:1"}}, "BAD_USER_INPUT", "send exactly one of"},
		{"bad ratio", key, generateMutation, map[string]any{"input": map[string]any{"prompt": "x", "ratio": "wide"}}, "BAD_USER_INPUT", ""},
		{"no capable upstream", key, generateMutation, map[string]any{"input": map[string]any{"prompt": "x", "background": "transparent"}}, "NO_UPSTREAM", models.NoUpstreamMessage},
		{"insufficient credits", poorKey, generateMutation, map[string]any{"input": map[string]any{"prompt": "x"}}, "INSUFFICIENT_CREDITS", "need 1, have 0"},
		{"over the quota", key, `mutation { createAccount(input: {email: "d@example.com", nickname: "d", credits: 50}) { id } }`, nil, "BAD_USER_INPUT", ""},
		{"bad first", key, `{ jobs(first: 0) { edges { cursor } } }`, nil, "BAD_USER_INPUT", "first must be a positive integer"},
		{"schema violation", key, `{ jobs(status: running) { edges { cursor } } }`, nil, "GRAPHQL_VALIDATION_FAILED", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.gql(c.key, c.query, c.vars)
			if r.code() != c.code {
				t.Fatalf("code %q, want %q: %+v", r.code(), c.code, r.Errors)
			}
			if c.message != "" && !strings.Contains(r.Errors[0].Message, c.message) {
				t.Fatalf("message %q, want it to contain %q", r.Errors[0].Message, c.message)
			}
			// A missing or invalid key is 401, as the spec's section 5 and REST answer; other refusals 200.
			want := http.StatusOK
			switch c.code {
			case "UNAUTHENTICATED":
				want = http.StatusUnauthorized
			case "GRAPHQL_VALIDATION_FAILED":
				want = http.StatusUnprocessableEntity
			}
			if r.Status != want {
				t.Fatalf("HTTP status %d, want %d", r.Status, want)
			}
		})
	}
	// Introspection needs no credential: tools fetch the schema without a key.
	if r := e.gql("", `{ __schema { queryType { name } } }`, nil); r.Status != http.StatusOK || len(r.Errors) != 0 {
		t.Fatalf("introspection without a key: %d %+v", r.Status, r.Errors)
	}

	// The same refusals over REST carry the same messages.
	status, body := e.rest("POST", "/api/generate", poorKey, map[string]any{"prompt": "x"})
	r := e.gql(poorKey, generateMutation, map[string]any{"input": map[string]any{"prompt": "x"}})
	if status != http.StatusPaymentRequired || body["error"] != r.Errors[0].Message {
		t.Fatalf("REST %d %v vs GraphQL %q", status, body, r.Errors[0].Message)
	}
	if _, b := e.rest("GET", "/api/balance", key, nil); b["credits"] != float64(1) {
		t.Fatalf("credits = %v after refused submits, want 1 (nothing charged)", b["credits"])
	}
	if _, b := e.rest("GET", "/api/balance", poorKey, nil); b["credits"] != float64(0) {
		t.Fatalf("credits = %v after refused submits, want 0", b["credits"])
	}

	// What the identities may do.
	d := e.gql(key, `{ me { kind tenantId } balance { credits identity } tenantPool { balance spendable reserved unmetered }
	  tenantStats(hours: 500) { windowHours mine { jobs { total } } } tenantUsage(days: 0) { days daily { date total } }
	  accounts { email apiKey shared } }`, nil).must(t)
	if d["me"].(map[string]any)["kind"] != "tenant" || d["tenantStats"].(map[string]any)["windowHours"] != float64(168) ||
		d["tenantUsage"].(map[string]any)["days"] != float64(30) || len(d["accounts"].([]any)) != 1 {
		t.Fatalf("tenant view = %v", d)
	}
	if acc := d["accounts"].([]any)[0].(map[string]any); acc["apiKey"] != member {
		t.Fatalf("account = %v", acc)
	}
	m := e.gql(member, `{ me { kind accountId } balance { identity } jobs { edges { cursor } } }`, nil).must(t)
	if m["me"].(map[string]any)["kind"] != "account" || m["balance"].(map[string]any)["identity"] != "account" {
		t.Fatalf("member view = %v", m)
	}
}

func TestTemplatesHooksAndAccountsMirrorREST(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	create := e.gql(key, `mutation($cfg: JSON!) {
	  createTemplate(input: {type: image, slug: "poster", zhName: "海报", ratio: "3:4", variableLabels: {title: "标题"}, generationConfigs: $cfg}) {
	    id type source slug ratio variableLabels generationConfigs { __typename ... on ImageConfig { mode model promptTemplate fields { key label required } } }
	  } }`, map[string]any{"cfg": []any{map[string]any{"model": "auto", "prompt_template": "A poster titled {title}",
		"fields": []any{map[string]any{"key": "title", "label": "Title"}}}}}).must(t)
	tpl := create["createTemplate"].(map[string]any)
	if tpl["source"] != "mine" || tpl["ratio"] != "3:4" || tpl["variableLabels"].(map[string]any)["title"] != "标题" {
		t.Fatalf("created = %v", tpl)
	}
	cfg := tpl["generationConfigs"].([]any)[0].(map[string]any)
	if cfg["__typename"] != "ImageConfig" || cfg["mode"] != "form" || cfg["promptTemplate"] != "A poster titled {title}" {
		t.Fatalf("config = %v", cfg)
	}
	bad := e.gql(key, `mutation { createTemplate(input: {type: image, zhName: "x", generationConfigs: [{model: "auto", prompt_template: "Hi {name}"}]}) { id } }`, nil)
	status, restBad := e.rest("POST", "/api/templates", key, map[string]any{"type": "image", "zh_name": "x",
		"generation_configs": []any{map[string]any{"model": "auto", "prompt_template": "Hi {name}"}}})
	if bad.code() != "BAD_USER_INPUT" || status != 400 || bad.Errors[0].Message != restBad["error"] {
		t.Fatalf("GraphQL %+v vs REST %d %v", bad.Errors, status, restBad)
	}
	upd := e.gql(key, `mutation($id: ID!) { updateTemplate(input: {id: $id, description: "new", variableLabels: {title: "主标题"}}) { description variableLabels } }`,
		map[string]any{"id": tpl["id"]}).must(t)
	if u := upd["updateTemplate"].(map[string]any); u["description"] != "new" || u["variableLabels"].(map[string]any)["title"] != "主标题" {
		t.Fatalf("updated = %v", u)
	}
	// The listing is the REST listing, row for row.
	list := e.gql(key, `{ templates(source: mine) { id slug zhName } skills { slug zhName fields { key } } }`, nil).must(t)
	_, restList := e.rest("GET", "/api/templates?source=mine", key, nil)
	if got, want := len(list["templates"].([]any)), len(restList["templates"].([]any)); got != 1 || got != want {
		t.Fatalf("templates: GraphQL %d rows, REST %d", got, want)
	}
	hook := e.gql(key, `mutation { upsertTemplateHook(input: {imageTemplateSlug: "poster", hookType: article, hookTemplateSlug: "poster"}) { created hook { id enabled hookType } } }`, nil)
	if hook.code() == "" {
		h := hook.Data["upsertTemplateHook"].(map[string]any)
		id := h["hook"].(map[string]any)["id"]
		e.gql(key, `mutation($id: ID!) { deleteTemplateHook(id: $id) { id } }`, map[string]any{"id": id}).must(t)
	} else if hook.code() != "BAD_USER_INPUT" && hook.code() != "NOT_FOUND" {
		t.Fatalf("hook: %+v", hook.Errors)
	}
	acc := e.gql(key, `mutation { createAccount(input: {email: "a@example.com", nickname: "a", credits: 3}) { id shared credits apiKey } }`, nil).must(t)
	a := acc["createAccount"].(map[string]any)
	if a["shared"] != false || a["credits"] != float64(3) || !strings.HasPrefix(a["apiKey"].(string), "sk-studio-") {
		t.Fatalf("account = %v", a)
	}
	q := e.gql(key, `mutation($id: ID!) { setAccountQuota(accountId: $id, shared: true) { shared credits } toggleAccount(accountId: $id, disabled: true) { disabled } }`,
		map[string]any{"id": a["id"]}).must(t)
	if q["setAccountQuota"].(map[string]any)["shared"] != true || q["toggleAccount"].(map[string]any)["disabled"] != true {
		t.Fatalf("quota/toggle = %v", q)
	}
	if r := e.gql(a["apiKey"].(string), `{ balance { credits } }`, nil); r.code() != "UNAUTHENTICATED" {
		t.Fatalf("a disabled member's key: %+v", r.Errors)
	}
	if _, pool := e.rest("GET", "/api/tenant-pool", key, nil); pool["reserved"] != float64(0) || pool["balance"] != float64(10) {
		t.Fatalf("pool after shared = %v", pool)
	}
}

func TestDepthAndComplexityLimits(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 1)
	page := `jobs(first: 100) { edges { node { ` + jobFields + ` } cursor } pageInfo { hasNextPage } }`
	if r := e.gql(key, `{ `+page+` }`, nil); len(r.Errors) > 0 {
		t.Fatalf("one full page is refused: %+v", r.Errors)
	}
	r := e.gql(key, `{ a: `+page+` b: `+page+` c: `+page+` }`, nil)
	if r.code() != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Fatalf("three full pages: %+v, want COMPLEXITY_LIMIT_EXCEEDED", r.Errors)
	}
	// The schema has no cycles, so the default depth (10) is a guard for later; check it with a low one.
	shallow := httptest.NewServer(graph.NewHandler(e.svc.Jobs.App, graph.Options{MaxDepth: 3}))
	defer shallow.Close()
	deep := e.gqlAt(shallow.URL, map[string]string{"X-API-Key": key},
		`query { ...J } fragment J on Query { jobs { edges { node { steps { name } } } } }`, nil)
	if deep.code() != "DEPTH_LIMIT_EXCEEDED" || !strings.Contains(deep.Errors[0].Message, "5 levels deep") {
		t.Fatalf("deep query: %+v", deep.Errors)
	}
	if ok := e.gqlAt(shallow.URL, map[string]string{"X-API-Key": key}, `{ balance { credits } __schema { types { fields { type { ofType { name } } } } } }`, nil); len(ok.Errors) > 0 {
		t.Fatalf("introspection counted against the depth: %+v", ok.Errors)
	}
}

func TestSubscriptionsPerConnectionAreBounded(t *testing.T) {
	e := newEnv(t, upstreams(t, 0, false))
	_, key := e.tenant("Acme", 10)
	srv := httptest.NewServer(graph.NewHandler(e.svc.Jobs.App, graph.Options{MaxSubscriptions: 2}))
	defer srv.Close()
	c := dial(t, srv.URL, transportWS, nil)
	c.mustInit(map[string]any{"X-API-Key": key})
	for i := 1; i <= 3; i++ {
		c.subscribe(fmt.Sprint(i), `subscription { jobs { jobId } }`, nil)
	}
	// The three start concurrently: whichever comes third is refused.
	m, ok := c.next(5 * time.Second)
	if !ok || !strings.Contains(string(m.Payload), `"code":"RATE_LIMITED"`) {
		t.Fatalf("third subscription: %s %s, want RATE_LIMITED", m.Type, m.Payload)
	}
	if m, ok := c.next(time.Second); !ok || m.Type != "complete" {
		t.Fatalf("refused subscription: %s %s, want complete", m.Type, m.Payload)
	}
	// Completing one frees its place.
	running := "1"
	if m.ID == "1" {
		running = "2"
	}
	c.send(wsMsg{Type: "complete", ID: running})
	time.Sleep(200 * time.Millisecond)
	c.subscribe("4", `subscription { jobs { jobId } }`, nil)
	jobID := e.generate(key, map[string]any{"prompt": "x"})
	for {
		m, ok := c.next(10 * time.Second)
		if !ok {
			t.Fatalf("subscription 4 never received the job")
		}
		if m.ID == "4" && isData(m) && strings.Contains(string(m.Payload), jobID) {
			break
		}
		if m.Type == "error" {
			t.Fatalf("error: %+v %s", m, m.Payload)
		}
	}
}

func TestGraphiQLAndGET(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 1)
	req, _ := http.NewRequest("GET", e.srv.URL+"/graphql", nil)
	req.Header.Set("Accept", "text/html")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(strings.ToLower(string(page)), "graphiql") {
		t.Fatalf("GraphiQL: %d %.200s", res.StatusCode, page)
	}
	req, _ = http.NewRequest("GET", e.srv.URL+"/graphql?query="+strings.ReplaceAll("{ balance { credits } }", " ", "%20"), nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Data struct {
			Balance struct{ Credits int } `json:"balance"`
		} `json:"data"`
	}
	err = json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if err != nil || out.Data.Balance.Credits != 1 {
		t.Fatalf("GET query: %v %+v", err, out)
	}
}

func TestCreateClaim(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	member := e.member(key, "m@example.com")
	tpl := e.gql(e.adminKey, `mutation { createTemplate(input: {type: image, slug: "platform-poster", zhName: "海报",
	  generationConfigs: [{model: "auto", prompt_template: "A poster"}]}) { id source } }`, nil).must(t)["createTemplate"].(map[string]any)
	claim := `mutation($ids: [ID!]!, $credits: Int!) { createClaim(input: {templateIds: $ids, credits: $credits, note: "shop"}) {
	  code claimUrl credits templates { slug zhName } tutorialPdf { url } creditsBalanceAfter } }`
	out := e.gql(key, claim, map[string]any{"ids": []string{tpl["id"].(string)}, "credits": 4}).must(t)["createClaim"].(map[string]any)
	if !strings.HasPrefix(out["code"].(string), "promo-") || !strings.HasSuffix(out["claimUrl"].(string), "/claim/"+out["code"].(string)) ||
		out["credits"] != float64(4) || out["creditsBalanceAfter"] != float64(6) || out["tutorialPdf"] != nil {
		t.Fatalf("claim = %v", out)
	}
	if r := e.gql(key, claim, map[string]any{"ids": []string{tpl["id"].(string)}, "credits": 50}); r.code() != "CONFLICT" {
		t.Fatalf("over the pool: %+v", r.Errors)
	}
	if r := e.gql(key, claim, map[string]any{"ids": []string{}, "credits": 1}); r.code() != "BAD_USER_INPUT" {
		t.Fatalf("no template: %+v", r.Errors)
	}
	if r := e.gql(member, claim, map[string]any{"ids": []string{tpl["id"].(string)}, "credits": 1}); r.code() != "FORBIDDEN" {
		t.Fatalf("member key: %+v", r.Errors)
	}
}

// introspection is GraphiQL's introspection query (graphql-js getIntrospectionQuery).
const introspection = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } }
}`

func TestIntrospectionPassesTheLimits(t *testing.T) {
	e := newEnv(t)
	d := e.gql("", introspection, nil).must(t)
	types := d["__schema"].(map[string]any)["types"].([]any)
	names := map[string]bool{}
	for _, ty := range types {
		names[ty.(map[string]any)["name"].(string)] = true
	}
	for _, want := range []string{"Job", "JobConnection", "VideoTask", "Template", "TemplateConfig", "ClaimCode", "Subscription"} {
		if !names[want] {
			t.Fatalf("type %s missing from the schema", want)
		}
	}
}

func TestAvailableModelsMirrorREST(t *testing.T) {
	e := newEnv(t, upstreams(t, 0, false))
	_, key := e.tenant("Acme", 1)
	d := e.gql(key, `{ image: availableModels { __typename ... on ImageModels { mediaType default families { name channels available } channels { name family capabilities available } } }
	  video: availableModels(mediaType: video) { __typename ... on VideoModels { mediaType tiers { code minDuration maxDuration resolutions { resolution credits } available } } } }`, nil).must(t)
	img := d["image"].(map[string]any)
	if img["__typename"] != "ImageModels" || img["default"] != "auto" || len(img["channels"].([]any)) != 2 {
		t.Fatalf("image catalogue = %v", img)
	}
	raw, _ := json.Marshal(d)
	if strings.Contains(string(raw), "prov-") {
		t.Fatalf("the catalogue names a provider: %s", raw)
	}
	_, rest := e.rest("GET", "/api/available-models", key, nil)
	if len(rest["channels"].([]any)) != len(img["channels"].([]any)) || len(rest["families"].([]any)) != len(img["families"].([]any)) {
		t.Fatalf("GraphQL %v vs REST %v", img, rest)
	}
	video := d["video"].(map[string]any)
	_, restVideo := e.rest("GET", "/api/available-models?media_type=video", key, nil)
	if video["__typename"] != "VideoModels" || len(video["tiers"].([]any)) == 0 || len(video["tiers"].([]any)) != len(restVideo["tiers"].([]any)) {
		t.Fatalf("video catalogue = %v, REST %v", video, restVideo)
	}
}
