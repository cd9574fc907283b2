package rest_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"gorm.io/gorm"

	"studio/models"
)

// tplImage returns a POST /api/templates body of a form-mode image template.
func tplImage(slug, prompt string) map[string]any {
	return map[string]any{"type": "image", "slug": slug, "zh_name": "海报 " + slug, "ratio": "3:4",
		"sample_images": []string{"https://cdn.example.com/" + slug + ".png"}, "template_type": "poster", "domain": "retail",
		"genre": "festival", "category": "seasonal", "description": "a poster",
		"generation_configs": []any{map[string]any{"model": "auto", "prompt_template": prompt,
			"fields": []any{map[string]any{"key": "title", "label": "标题"}}}}}
}

// tplSpec returns a POST /api/templates body of a spec-mode template of the type.
func tplSpec(typ, slug, spec string) map[string]any {
	cfg := map[string]any{"skill_spec_md": spec}
	if typ == "article" {
		cfg["format"] = "xiaohongshu"
	}
	return map[string]any{"type": typ, "slug": slug, "zh_name": "规格 " + slug, "generation_configs": []any{cfg}}
}

// tplVideo returns a POST /api/video-templates body.
func tplVideo(slug string, cfg map[string]any) map[string]any {
	return map[string]any{"slug": slug, "zh_name": "视频 " + slug, "sample_cover_image": "https://cdn.example.com/" + slug + ".jpg",
		"sample_video_url": "https://cdn.example.com/" + slug + ".mp4", "category": "promo", "generation_configs": []any{cfg}}
}

// tplCreate posts a template and returns its id, failing unless it answers 200.
func (e *env) tplCreate(path, key string, body map[string]any) string {
	e.t.Helper()
	r := e.call("POST", path, key, body).expect(e.t, 200)
	return r.JSON["template"].(map[string]any)["id"].(string)
}

// tplRows lists templates and returns the rows by slug.
func (e *env) tplRows(path, key string) map[string]map[string]any {
	e.t.Helper()
	r := e.call("GET", path, key, nil).expect(e.t, 200)
	out := map[string]map[string]any{}
	for _, row := range r.JSON["templates"].([]any) {
		m := row.(map[string]any)
		slug, _ := m["slug"].(string)
		out[slug] = m
	}
	return out
}

// tplGate gates templates as claim-code creation would.
func (e *env) tplGate(ids ...string) {
	e.t.Helper()
	if err := e.app.Tx(context.Background(), func(tx *gorm.DB) error { return e.app.Templates().GateTemplatesTx(tx, ids) }); err != nil {
		e.t.Fatalf("gate: %v", err)
	}
}

func keysOf(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return strings.Join(ks, ",")
}

func TestTemplateListingFiltersAndShapes(t *testing.T) {
	e := newEnv(t)
	_, a := e.tenant("A", 0)
	e.tplCreate("/api/templates", a, tplImage("a-poster", "poster {title}"))
	e.tplCreate("/api/templates", a, tplSpec("article", "a-copy", "# copy spec"))
	e.tplCreate("/api/templates", e.adminKey, tplImage("p-poster", "platform {title}"))
	e.tplCreate("/api/video-templates", a, tplVideo("a-clip", map[string]any{"model": "vidA-2-0-fast-260801", "ratio": "9:16", "duration": 8, "resolution": "720p", "skill_spec_md": "# clip"}))
	e.tplCreate("/api/video-templates", e.adminKey, tplVideo("p-clip", map[string]any{"skill_spec_md": "# clip"}))

	cases := []struct {
		query string
		want  string // slug:source, sorted
	}{
		{"", "a-copy:mine,a-poster:mine,p-poster:platform"},
		{"?type=&source=", "a-copy:mine,a-poster:mine,p-poster:platform"},
		{"?source=all", "a-copy:mine,a-poster:mine,p-poster:platform"},
		{"?type=image", "a-poster:mine,p-poster:platform"},
		{"?type=article", "a-copy:mine"},
		{"?source=mine", "a-copy:mine,a-poster:mine"},
		{"?source=platform", "p-poster:platform"},
		{"?type=article&source=platform", ""},
	}
	for _, c := range cases {
		t.Run("list"+c.query, func(t *testing.T) {
			r := e.call("GET", "/api/templates"+c.query, a, nil).expect(t, 200)
			var got []string
			for _, row := range r.JSON["templates"].([]any) {
				m := row.(map[string]any)
				got = append(got, m["slug"].(string)+":"+m["source"].(string))
			}
			sort.Strings(got)
			if strings.Join(got, ",") != c.want {
				t.Fatalf("got %v, want %s", got, c.want)
			}
		})
	}
	for _, q := range []string{"?type=video", "?type=IMAGE", "?source=public", "?source=Mine", "?type=image&source=x"} {
		r := e.call("GET", "/api/templates"+q, a, nil).expect(t, 400)
		if r.str("error") == "" {
			t.Fatalf("%s: no error message", q)
		}
	}
	e.call("GET", "/api/video-templates?source=nope", a, nil).expect(t, 400)
	e.call("GET", "/api/templates", "", nil).expect(t, 401)

	rows := e.tplRows("/api/templates", a)
	img := rows["a-poster"]
	for _, k := range []string{"ratio", "sample_images", "template_type", "domain", "genre", "category", "description", "generation_configs", "source", "active", "locked"} {
		if _, ok := img[k]; !ok {
			t.Errorf("image row lacks %q: keys %s", k, keysOf(img))
		}
	}
	if img["ratio"] != "3:4" || img["domain"] != "retail" || img["template_type"] != "poster" {
		t.Errorf("image row = %v", img)
	}
	cfgs, ok := img["generation_configs"].([]any)
	if !ok || len(cfgs) != 1 {
		t.Fatalf("generation_configs must stay an array of objects: %v", img["generation_configs"])
	}
	cfg := cfgs[0].(map[string]any)
	if cfg["mode"] != "form" || cfg["prompt_template"] != "poster {title}" || cfg["model"] != "auto" {
		t.Errorf("image config = %v", cfg)
	}
	art := rows["a-copy"]
	for _, k := range []string{"ratio", "sample_images", "domain"} {
		if _, ok := art[k]; ok {
			t.Errorf("article row carries image column %q", k)
		}
	}
	if art["template_type"] != "article" || art["type"] != "article" {
		t.Errorf("article row = %v", art)
	}

	videos := e.tplRows("/api/video-templates", a)
	if len(videos) != 2 || videos["a-clip"]["source"] != "mine" || videos["p-clip"]["source"] != "platform" {
		t.Fatalf("video rows = %v", videos)
	}
	v := videos["a-clip"]
	for _, k := range []string{"sample_cover_image", "sample_video_url"} {
		if s, _ := v[k].(string); s == "" {
			t.Errorf("video row lacks %q", k)
		}
	}
	for _, k := range []string{"ratio", "duration", "sample_images", "type"} {
		if _, ok := v[k]; ok {
			t.Errorf("video row carries top-level %q (shapes are not flattened)", k)
		}
	}
	vc := v["generation_configs"].([]any)[0].(map[string]any)
	if vc["ratio"] != "9:16" || vc["duration"] != float64(8) || vc["model"] != "vidA-2-0-fast-260801" || vc["resolution"] != "720p" {
		t.Errorf("video config = %v", vc)
	}
	if pv := e.tplRows("/api/video-templates?source=platform", a); len(pv) != 1 || pv["p-clip"] == nil {
		t.Errorf("video source=platform = %v", pv)
	}
	if pc := videos["p-clip"]["generation_configs"].([]any)[0].(map[string]any); pc["ratio"] != nil || pc["duration"] != nil || pc["model"] != "auto" {
		t.Errorf("video config left to the submit = %v", pc)
	}
}

func TestTemplateCreationErrorsOverHTTP(t *testing.T) {
	e := newEnv(t)
	_, a := e.tenant("A", 0)
	e.tplCreate("/api/templates", a, tplImage("taken", "x {title}"))
	bad := func(edit func(m map[string]any)) map[string]any {
		m := tplImage("fresh", "x {title}")
		edit(m)
		return m
	}
	cases := []struct {
		name   string
		path   string
		body   any
		status int
		msg    string
	}{
		{"slug taken", "/api/templates", tplImage("taken", "y {title}"), 409, `slug "taken" is already taken`},
		{"slug syntax", "/api/templates", bad(func(m map[string]any) { m["slug"] = "Not Valid" }), 400, "^[a-z0-9][a-z0-9-]{1,63}$"},
		{"zh_name", "/api/templates", bad(func(m map[string]any) { delete(m, "zh_name") }), 400, "zh_name is required"},
		{"placeholders without fields", "/api/templates", bad(func(m map[string]any) {
			m["generation_configs"] = []any{map[string]any{"prompt_template": "x {title}"}}
		}), 400, "generation_configs[0].prompt_template: has placeholders {title} but no fields declare them"},
		{"select without options", "/api/templates", bad(func(m map[string]any) {
			m["generation_configs"] = []any{map[string]any{"prompt_template": "{s}", "fields": []any{map[string]any{"key": "s", "label": "S", "type": "select", "options": []any{}}}}}
		}), 400, "a select field needs at least one option"},
		{"gated", "/api/templates", bad(func(m map[string]any) { m["gated"] = true }), 400, "gated cannot be set"},
		{"malformed JSON", "/api/templates", `{"type":`, 400, "invalid JSON"},
		{"video slug required", "/api/video-templates", map[string]any{"zh_name": "v", "generation_configs": []any{map[string]any{"skill_spec_md": "# S"}}}, 400, "slug is required"},
		{"video tier does not fit", "/api/video-templates", tplVideo("clip", map[string]any{"model": "vidA-2-0-pro-260801", "duration": 20, "skill_spec_md": "# S"}), 400, "duration: 20 s is outside 4–15 s"},
		{"video unknown tier", "/api/video-templates", tplVideo("clip", map[string]any{"model": "vidZ", "skill_spec_md": "# S"}), 400, `unknown video model "vidZ"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", c.path, a, c.body).expect(t, c.status)
			if !strings.Contains(r.str("error"), c.msg) {
				t.Fatalf("error %q, want it to contain %q", r.str("error"), c.msg)
			}
		})
	}
}

func TestTemplatePermissionsAndChanges(t *testing.T) {
	e := newEnv(t)
	_, a := e.tenant("A", 0)
	_, b := e.tenant("B", 0)
	_, member := e.member(a, map[string]any{"nickname": "m"})
	own := e.tplCreate("/api/templates", a, tplImage("a-poster", "poster {title}"))
	plat := e.tplCreate("/api/templates", e.adminKey, tplImage("p-poster", "platform {title}"))
	clip := e.tplCreate("/api/video-templates", a, tplVideo("a-clip", map[string]any{"skill_spec_md": "# S"}))

	// Member account keys cannot create or change templates (permission table), but list them.
	e.call("POST", "/api/templates", member, tplImage("m-poster", "m {title}")).expect(t, 403)
	e.call("POST", "/api/video-templates", member, tplVideo("m-clip", map[string]any{"skill_spec_md": "# S"})).expect(t, 403)
	e.call("PATCH", "/api/templates", member, map[string]any{"id": own, "zh_name": "x"}).expect(t, 403)
	if rows := e.tplRows("/api/templates", member); rows["a-poster"]["source"] != "mine" {
		t.Fatalf("member listing = %v", rows)
	}

	// Another tenant's template is 404; a platform template is the administrator's.
	e.call("PATCH", "/api/templates", b, map[string]any{"id": own, "zh_name": "stolen"}).expect(t, 404)
	e.call("PATCH", "/api/video-templates", b, map[string]any{"id": clip, "zh_name": "stolen"}).expect(t, 404)
	e.call("PATCH", "/api/templates", a, map[string]any{"id": plat, "zh_name": "mine now"}).expect(t, 403)
	e.call("PATCH", "/api/templates", a, map[string]any{"id": own, "gated": false}).expect(t, 400)
	e.call("PATCH", "/api/templates", a, map[string]any{"id": own}).expect(t, 400)
	e.call("PATCH", "/api/templates", a, map[string]any{"zh_name": "no id"}).expect(t, 400)

	r := e.call("PATCH", "/api/templates", a, map[string]any{"id": own, "description": "new words",
		"generation_configs": []any{map[string]any{"skill_spec_md": "# now a spec"}}}).expect(t, 200)
	tpl := r.JSON["template"].(map[string]any)
	cfg := tpl["generation_configs"].([]any)[0].(map[string]any)
	if tpl["description"] != "new words" || tpl["zh_name"] != "海报 a-poster" || cfg["mode"] != "spec" || cfg["skill_spec_md"] != "# now a spec" {
		t.Fatalf("patched = %v", tpl)
	}
	e.call("PATCH", "/api/video-templates", a, map[string]any{"id": clip, "active": false}).expect(t, 200)

	// Deactivation: listed to the owner with active false, to nobody else, and not usable.
	e.call("PATCH", "/api/templates", e.adminKey, map[string]any{"id": plat, "active": false}).expect(t, 200)
	if rows := e.tplRows("/api/templates", a); rows["p-poster"] != nil {
		t.Fatalf("inactive platform template listed to a tenant: %v", rows["p-poster"])
	}
	if rows := e.tplRows("/api/templates", e.adminKey); rows["p-poster"]["active"] != false {
		t.Fatalf("admin listing = %v", rows)
	}
	if v := e.tplRows("/api/video-templates?source=mine", a); v["a-clip"]["active"] != false {
		t.Fatalf("owner's inactive video template = %v", v)
	}
	if _, err := e.app.Templates().TemplateForUse(context.Background(), &models.Identity{Kind: models.IdentityTenant, TenantID: "x"}, models.TemplateRef{ID: plat}); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("inactive template for use: %v", err)
	}
	inactive := tplImage("born-inactive", "x {title}")
	inactive["active"] = false
	if r := e.call("POST", "/api/templates", a, inactive).expect(t, 200); r.JSON["template"].(map[string]any)["active"] != false {
		t.Fatalf("created with active false: %s", r.Body)
	}
	if rows := e.tplRows("/api/templates?source=mine", a); rows["born-inactive"]["active"] != false {
		t.Fatalf("stored active = %v", rows["born-inactive"]["active"])
	}

	// No DELETE: deletion is the administrator action template-delete.
	if r := e.call("DELETE", "/api/templates", a, map[string]any{"id": own}); r.Status != 405 && r.Status != 404 {
		t.Fatalf("DELETE /api/templates = %d, want it not offered", r.Status)
	}
	e.call("POST", "/api/admin", a, map[string]any{"action": "template-delete", "id": own}).expect(t, 403)
	e.call("POST", "/api/admin", e.adminKey, map[string]any{"action": "template-delete", "id": models.NewID()}).expect(t, 404)
	if r := e.admin(map[string]any{"action": "template-delete", "id": own}); r.JSON["ok"] != true || len(r.JSON) != 1 {
		t.Fatalf("template-delete = %s, want {ok}", r.Body)
	}
	e.admin(map[string]any{"action": "template-delete", "id": clip})
	if rows := e.tplRows("/api/templates", a); rows["a-poster"] != nil {
		t.Fatal("deleted template still listed")
	}
	if rows := e.tplRows("/api/video-templates", a); rows["a-clip"] != nil {
		t.Fatal("deleted video template still listed")
	}
}

func TestPersonalTemplates(t *testing.T) {
	e := newEnv(t)
	_, a := e.tenant("A", 0)
	_, me := e.personalLogin("me@example.com", 0)
	_, other := e.personalLogin("other@example.com", 0)
	id := e.tplCreate("/api/templates", me, tplSpec("image", "my-skill", "# mine"))
	e.tplCreate("/api/video-templates", me, tplVideo("my-clip", map[string]any{"skill_spec_md": "# mine"}))
	rows := e.tplRows("/api/templates?source=mine", me)
	if rows["my-skill"]["source"] != "mine" || rows["my-skill"]["generation_configs"].([]any)[0].(map[string]any)["skill_spec_md"] != "# mine" {
		t.Fatalf("personal listing = %v", rows)
	}
	if v := e.tplRows("/api/video-templates?source=mine", me); v["my-clip"] == nil {
		t.Fatal("personal video template not listed as mine")
	}
	for _, key := range []string{a, other} {
		if rows := e.tplRows("/api/templates", key); rows["my-skill"] != nil {
			t.Fatal("a personal template is visible to someone else")
		}
		e.call("PATCH", "/api/templates", key, map[string]any{"id": id, "zh_name": "x"}).expect(t, 404)
	}
	e.call("PATCH", "/api/templates", me, map[string]any{"id": id, "zh_name": "改名"}).expect(t, 200)
	r := e.call("GET", "/api/skills", me, nil).expect(t, 200)
	if !strings.Contains(string(r.Body), `"slug":"my-skill"`) || strings.Contains(string(r.Body), "# mine") {
		t.Fatalf("personal skills = %s", r.Body)
	}
}

// TestPromptTextNeverLeaks places unique markers in prompt_template, skill_spec_md and images and searches
// the raw bytes of every listing (and of jobs) for them, for callers who are not entitled to them.
func TestPromptTextNeverLeaks(t *testing.T) {
	_, fake := fakeUpstreams(t)
	e := newEnv(t, fake)
	const (
		platSpec   = "PLATFORM-SPEC-MARK-6b1f"
		gatedText  = "GATED-PROMPT-MARK-93ac"
		gatedImg   = "GATED-IMAGE-MARK-51de"
		tenantSpec = "TENANT-SPEC-MARK-0e7d"
		videoSpec  = "VIDEO-SPEC-MARK-c42a"
		videoText  = "VIDEO-GATED-MARK-77b0"
	)
	_, a := e.tenant("A", 0)
	_, b := e.tenant("B", 20)
	_, member := e.member(a, map[string]any{"nickname": "m"})
	buyerID, buyer := e.personalLogin("buyer@example.com", 0)
	_, stranger := e.personalLogin("stranger@example.com", 0)

	e.tplCreate("/api/templates", e.adminKey, tplSpec("image", "plat-skill", "# spec "+platSpec))
	e.tplCreate("/api/templates", e.adminKey, tplSpec("article", "plat-copy", "# copy "+platSpec))
	gated := tplImage("gated-poster", "poster "+gatedText+" {title}")
	gated["sample_images"] = []string{"https://cdn.example.com/" + gatedImg + ".png"}
	gated["generation_configs"].([]any)[0].(map[string]any)["default_reference_images"] = []string{"https://cdn.example.com/ref-" + gatedImg + ".png"}
	gatedID := e.tplCreate("/api/templates", e.adminKey, gated)
	e.tplCreate("/api/templates", a, tplSpec("image", "a-skill", "# tenant "+tenantSpec))
	e.tplCreate("/api/video-templates", e.adminKey, tplVideo("plat-clip", map[string]any{"skill_spec_md": "# " + videoSpec}))
	gatedVideo := tplVideo("gated-clip", map[string]any{"prompt_template": "clip " + videoText + " {title}", "fields": []any{map[string]any{"key": "title", "label": "T"}}})
	gatedVideo["sample_cover_image"] = "https://cdn.example.com/" + gatedImg + ".jpg"
	gatedVideoID := e.tplCreate("/api/video-templates", e.adminKey, gatedVideo)
	e.tplGate(gatedID, gatedVideoID)
	if err := e.app.DB.Gorm.Create(&models.TemplateGrant{UserID: buyerID, TemplateID: gatedID, Code: "promo-test"}).Error; err != nil {
		t.Fatal(err)
	}

	paths := []string{"/api/templates", "/api/templates?type=image", "/api/templates?type=article", "/api/templates?source=platform",
		"/api/video-templates", "/api/skills"}
	body := func(key string) string {
		var all strings.Builder
		for _, p := range paths {
			all.Write(e.call("GET", p, key, nil).expect(t, 200).Body)
		}
		return all.String()
	}
	every := []string{platSpec, gatedText, gatedImg, tenantSpec, videoSpec, videoText}
	cases := []struct {
		name    string
		key     string
		sees    []string
		notSees []string
	}{
		{"other tenant", b, nil, every},
		{"member of the author tenant", member, nil, every},
		{"stranger", stranger, nil, every},
		{"grant holder", buyer, []string{gatedText, gatedImg}, []string{platSpec, tenantSpec, videoSpec, videoText}},
		{"author tenant", a, []string{tenantSpec}, []string{platSpec, gatedText, gatedImg, videoSpec, videoText}},
		{"administrator", e.adminKey, []string{platSpec, gatedText, gatedImg, videoSpec, videoText}, []string{tenantSpec}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			all := body(c.key)
			for _, m := range c.notSees {
				if strings.Contains(all, m) {
					t.Errorf("%s leaked to %s", m, c.name)
				}
			}
			for _, m := range c.sees {
				if !strings.Contains(all, m) {
					t.Errorf("%s not shown to %s, who is entitled to it", m, c.name)
				}
			}
		})
	}
	// The skill list never carries prompt text, even for the administrator.
	for _, key := range []string{e.adminKey, a, buyer} {
		s := string(e.call("GET", "/api/skills", key, nil).expect(t, 200).Body)
		for _, m := range []string{platSpec, gatedText, tenantSpec, videoSpec, videoText} {
			if strings.Contains(s, m) {
				t.Errorf("skill list carries %s", m)
			}
		}
	}
	// Locked rows say so.
	rows := e.tplRows("/api/templates", b)
	if rows["gated-poster"]["locked"] != true || len(rows["gated-poster"]["sample_images"].([]any)) != 0 {
		t.Fatalf("locked row = %v", rows["gated-poster"])
	}
	if rows := e.tplRows("/api/templates", buyer); rows["gated-poster"]["locked"] != false {
		t.Fatalf("grant holder row = %v", rows["gated-poster"])
	}

	// Jobs made from a skill never show its specification, and a locked template cannot be used.
	e.call("POST", "/api/generate", b, map[string]any{"template_slug": "gated-poster", "input": map[string]any{"title": "x"}}).expect(t, 403)
	r := e.call("POST", "/api/generate", b, map[string]any{"skill_slug": "plat-skill", "input": "a cat on a sofa"}).expect(t, 200)
	done := e.waitJob(b, r.str("jobId"))
	list := e.call("GET", "/api/jobs", b, nil).expect(t, 200)
	for _, raw := range [][]byte{r.Body, done.Body, list.Body} {
		if strings.Contains(string(raw), platSpec) {
			t.Fatalf("job response carries the skill specification: %s", raw)
		}
	}
}

func TestSkillListShape(t *testing.T) {
	e := newEnv(t)
	_, a := e.tenant("A", 0)
	form := tplImage("form-skill", "{title} {body}")
	form["generation_configs"] = []any{map[string]any{"prompt_template": "{title} {body}", "ref_required": true, "fields": []any{
		map[string]any{"key": "title", "label": "T"}, map[string]any{"key": "body", "label": "B", "type": "textarea"}}}}
	e.tplCreate("/api/templates", e.adminKey, form)
	e.tplCreate("/api/templates", e.adminKey, tplSpec("image", "spec-skill", "# S"))
	sel := tplImage("select-form", "{s}")
	sel["generation_configs"] = []any{map[string]any{"prompt_template": "{s}", "fields": []any{map[string]any{"key": "s", "label": "S", "type": "select", "options": []string{"a|A"}}}}}
	e.tplCreate("/api/templates", e.adminKey, sel)
	noSlug := tplSpec("image", "", "# S")
	delete(noSlug, "slug")
	e.tplCreate("/api/templates", e.adminKey, noSlug)
	e.tplCreate("/api/templates", e.adminKey, tplSpec("article", "copy-skill", "# S"))

	r := e.call("GET", "/api/skills", a, nil).expect(t, 200)
	skills := r.JSON["skills"].([]any)
	if len(skills) != 2 {
		t.Fatalf("skills = %s, want form-skill and spec-skill only", r.Body)
	}
	fs, ss := skills[0].(map[string]any), skills[1].(map[string]any)
	if fs["slug"] != "form-skill" || fs["thumb"] != "https://cdn.example.com/form-skill.png" || fs["ref_required"] != true || len(fs["fields"].([]any)) != 2 || fs["ratio"] != "3:4" || fs["genre"] != "festival" {
		t.Fatalf("form skill = %v", fs)
	}
	if ss["slug"] != "spec-skill" || ss["fields"] != nil || ss["thumb"] != nil {
		t.Fatalf("spec skill = %v", ss)
	}
	if len(fs) != 8 || len(ss) != 8 {
		t.Fatalf("skill keys: %s / %s, want exactly the 8 of spec 2.4", keysOf(fs), keysOf(ss))
	}
}

func TestTemplateHooks(t *testing.T) {
	e := newEnv(t)
	_, a := e.tenant("A", 0)
	_, b := e.tenant("B", 0)
	_, member := e.member(a, map[string]any{"nickname": "m"})
	_, person := e.personalLogin("p@example.com", 0)
	e.tplCreate("/api/templates", a, tplImage("poster", "p {title}"))
	e.tplCreate("/api/templates", a, tplSpec("article", "copy-1", "# 1"))
	e.tplCreate("/api/templates", e.adminKey, tplSpec("article", "copy-2", "# 2"))
	e.tplCreate("/api/video-templates", a, tplVideo("clip", map[string]any{"skill_spec_md": "# S"}))
	e.tplCreate("/api/templates", b, tplImage("b-poster", "p {title}"))

	for _, key := range []string{member, person, e.adminKey} {
		e.call("GET", "/api/template-hooks", key, nil).expect(t, 403)
		e.call("POST", "/api/template-hooks", key, map[string]any{"image_template_slug": "poster", "hook_type": "article", "hook_template_slug": "copy-1"}).expect(t, 403)
	}
	e.call("GET", "/api/template-hooks", "", nil).expect(t, 401)

	r := e.call("POST", "/api/template-hooks", a, map[string]any{"image_template_slug": "poster", "hook_type": "article", "hook_template_slug": "copy-1"}).expect(t, 200)
	first := r.JSON["hook"].(map[string]any)
	if r.JSON["created"] != true || first["enabled"] != true || first["note"] != "" || first["hook_template_slug"] != "copy-1" {
		t.Fatalf("created hook = %s", r.Body)
	}
	// The same image template and hook type again updates that row.
	r = e.call("POST", "/api/template-hooks", a, map[string]any{"image_template_slug": "poster", "hook_type": "article", "hook_template_slug": "copy-2", "enabled": false, "note": "platform copy"}).expect(t, 200)
	second := r.JSON["hook"].(map[string]any)
	if r.JSON["created"] != false || second["id"] != first["id"] || second["hook_template_slug"] != "copy-2" || second["enabled"] != false || second["note"] != "platform copy" {
		t.Fatalf("upserted hook = %s", r.Body)
	}
	hooks := e.call("GET", "/api/template-hooks", a, nil).expect(t, 200).JSON["hooks"].([]any)
	if len(hooks) != 1 || hooks[0].(map[string]any)["hook_template_slug"] != "copy-2" {
		t.Fatalf("hooks after two posts = %v, want one updated row", hooks)
	}
	e.call("POST", "/api/template-hooks", a, map[string]any{"image_template_slug": "poster", "hook_type": "video", "hook_template_slug": "clip"}).expect(t, 200)
	if n := len(e.call("GET", "/api/template-hooks?image_template_slug=poster", a, nil).expect(t, 200).JSON["hooks"].([]any)); n != 2 {
		t.Fatalf("hooks of poster = %d, want 2", n)
	}
	if n := len(e.call("GET", "/api/template-hooks?image_template_slug=other", a, nil).expect(t, 200).JSON["hooks"].([]any)); n != 0 {
		t.Fatalf("hooks of other = %d, want 0", n)
	}
	if n := len(e.call("GET", "/api/template-hooks", b, nil).expect(t, 200).JSON["hooks"].([]any)); n != 0 {
		t.Fatalf("tenant B sees %d hooks of A", n)
	}

	bad := []map[string]any{
		{"image_template_slug": "b-poster", "hook_type": "article", "hook_template_slug": "copy-1"},
		{"image_template_slug": "poster", "hook_type": "article", "hook_template_slug": "clip"},
		{"image_template_slug": "poster", "hook_type": "video", "hook_template_slug": "copy-1"},
		{"image_template_slug": "poster", "hook_type": "audio", "hook_template_slug": "copy-1"},
		{"hook_type": "article", "hook_template_slug": "copy-1"},
	}
	for _, body := range bad {
		if r := e.call("POST", "/api/template-hooks", a, body).expect(t, 400); r.str("error") == "" {
			t.Fatal("no error message")
		}
	}

	id := first["id"].(string)
	e.call("PATCH", "/api/template-hooks", b, map[string]any{"id": id, "enabled": true}).expect(t, 404)
	e.call("DELETE", "/api/template-hooks?id="+id, b, nil).expect(t, 404)
	e.call("DELETE", "/api/template-hooks", b, map[string]any{"id": id}).expect(t, 404)
	r = e.call("PATCH", "/api/template-hooks", a, map[string]any{"id": id, "enabled": true, "note": "on"}).expect(t, 200)
	if h := r.JSON["hook"].(map[string]any); h["enabled"] != true || h["note"] != "on" || h["hook_template_slug"] != "copy-2" {
		t.Fatalf("patched hook = %s", r.Body)
	}
	e.call("PATCH", "/api/template-hooks", a, map[string]any{"id": id, "hook_type": "video"}).expect(t, 400)
	e.call("PATCH", "/api/template-hooks", a, map[string]any{"id": id, "hook_type": "video", "hook_template_slug": "clip"}).expect(t, 409)
	e.call("DELETE", "/api/template-hooks", a, nil).expect(t, 400)
	e.call("DELETE", "/api/template-hooks", a, map[string]any{"id": id}).expect(t, 200)
	e.call("DELETE", "/api/template-hooks?id="+id, a, nil).expect(t, 404)
	hooks = e.call("GET", "/api/template-hooks", a, nil).expect(t, 200).JSON["hooks"].([]any)
	if len(hooks) != 1 {
		t.Fatalf("hooks after delete = %v", hooks)
	}
	e.call("DELETE", "/api/template-hooks?id="+hooks[0].(map[string]any)["id"].(string), a, nil).expect(t, 200)
}
