package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gorm.io/datatypes"
	"gorm.io/gorm"

	"studio/models"
	"studio/models/modelstest"
)

// tplApp returns a core over a fresh database for the template tests.
func tplApp(t *testing.T) *models.App {
	t.Helper()
	app, err := models.NewApp(context.Background(), modelstest.NewDB(t), models.DefaultConfig(), models.Deps{})
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	return app
}

// tplTenant creates a tenant and returns its tenant-key identity.
func tplTenant(t *testing.T, app *models.App, name string) *models.Identity {
	t.Helper()
	ten, _, err := app.Accounts().CreateTenant(context.Background(), models.TenantInput{Name: name})
	if err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	return &models.Identity{Kind: models.IdentityTenant, TenantID: ten.ID}
}

// tplUser creates a personal account and returns its identity.
func tplUser(t *testing.T, app *models.App) *models.Identity {
	t.Helper()
	u := models.User{ID: models.NewID(), Email: models.NewID()[:8] + "@example.com"}
	if err := app.DB.Gorm.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	return &models.Identity{Kind: models.IdentityUser, UserID: u.ID}
}

var tplAdmin = &models.Identity{Kind: models.IdentityAdmin}

// configs encodes generation configs given as JSON object literals.
func configs(objs ...string) json.RawMessage {
	return json.RawMessage("[" + strings.Join(objs, ",") + "]")
}

// imageInput returns a valid form-mode image template input with the given configs.
func imageInput(cfgs json.RawMessage) models.TemplateInput {
	return models.TemplateInput{Type: "image", ZhName: "海报", GenerationConfigs: cfgs}
}

// wantErr fails t unless err has the kind and contains the message ("" = no error expected).
func wantErr(t *testing.T, err error, kind models.Kind, msg string) {
	t.Helper()
	if msg == "" {
		if err != nil {
			t.Fatalf("got error %q, want none", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got no error, want %s %q", kind, msg)
	}
	if models.KindOf(err) != kind || !strings.Contains(err.Error(), msg) {
		t.Fatalf("got %s %q, want %s containing %q", models.KindOf(err), err, kind, msg)
	}
}

func TestCreateTemplateValidation(t *testing.T) {
	app := tplApp(t)
	tenant := tplTenant(t, app, "Acme")
	form := `{"prompt_template":"poster of {title}","fields":[{"key":"title","label":"Title"}]}`
	with := func(edit func(*models.TemplateInput)) models.TemplateInput {
		in := imageInput(configs(form))
		edit(&in)
		return in
	}
	cfg := func(objs ...string) models.TemplateInput { return imageInput(configs(objs...)) }
	article := func(objs ...string) models.TemplateInput {
		return models.TemplateInput{Type: "article", ZhName: "文案", GenerationConfigs: configs(objs...)}
	}
	tests := []struct {
		name string
		in   models.TemplateInput
		kind models.Kind
		msg  string
	}{
		{"form", cfg(form), 0, ""},
		{"spec", cfg(`{"skill_spec_md":"# Spec"}`), 0, ""},
		{"optional field unused", cfg(`{"prompt_template":"{a}","fields":[{"key":"a","label":"A"},{"key":"b","label":"B","required":false}]}`), 0, ""},
		{"select string options", cfg(`{"prompt_template":"{s}","fields":[{"key":"s","label":"S","type":"select","options":["l|Large","m"]}]}`), 0, ""},
		{"select object options", cfg(`{"prompt_template":"{s}","fields":[{"key":"s","label":"S","type":"select","options":[{"label":"Large","value":"l"}]}]}`), 0, ""},
		{"select mixed options", cfg(`{"prompt_template":"{s}","fields":[{"key":"s","label":"S","type":"select","options":["x|X",{"label":"Y","value":"y"}]}]}`), 0, ""},
		{"image columns", with(func(in *models.TemplateInput) {
			in.Slug, in.Ratio, in.SampleImages = "spring-poster", "3:4", []string{"https://cdn.example.com/a.png"}
			in.TemplateType, in.Domain, in.Genre, in.Category = "poster", "retail", "festival", "seasonal"
			in.VariableLabels = map[string]string{"title": "活动名称"}
		}), 0, ""},
		{"article form", article(`{"format":"xiaohongshu","prompt_template":"about {subject}","fields":[{"key":"subject","label":"Subject"}]}`), 0, ""},
		{"article spec", article(`{"format":"wechat","skill_spec_md":"# Spec"}`), 0, ""},

		{"zh_name required", with(func(in *models.TemplateInput) { in.ZhName = "  " }), models.KindInvalid, "zh_name is required"},
		{"type required", with(func(in *models.TemplateInput) { in.Type = "" }), models.KindInvalid, "type is required: image or article"},
		{"type unknown", with(func(in *models.TemplateInput) { in.Type = "video" }), models.KindInvalid, `type must be image or article, not "video"`},
		{"configs absent", with(func(in *models.TemplateInput) { in.GenerationConfigs = nil }), models.KindInvalid, "generation_configs is required"},
		{"configs empty", cfg(), models.KindInvalid, "generation_configs is required"},
		{"configs not an array", with(func(in *models.TemplateInput) { in.GenerationConfigs = json.RawMessage(`{"prompt_template":"x"}`) }), models.KindInvalid, "generation_configs must be an array"},
		{"configs wrong member type", cfg(`{"prompt_template":5}`), models.KindInvalid, "generation_configs: prompt_template must be a string"},
		{"too many configs", cfg(strings.Repeat(form+",", 10) + form), models.KindInvalid, "at most 10 generation configs"},
		{"placeholders without fields", cfg(`{"prompt_template":"poster of {title}"}`), models.KindInvalid, "generation_configs[0].prompt_template: has placeholders {title} but no fields declare them"},
		{"undeclared placeholder", cfg(`{"prompt_template":"{title} {date}","fields":[{"key":"title","label":"Title"}]}`), models.KindInvalid, "generation_configs[0].prompt_template: placeholder {date} is not declared in fields"},
		{"required field unused", cfg(`{"prompt_template":"{a}","fields":[{"key":"a","label":"A"},{"key":"b","label":"B"}]}`), models.KindInvalid, `generation_configs[0].fields[1]: required field "b" is not used in prompt_template`},
		{"error names the config", cfg(form, `{"prompt_template":"{x}"}`), models.KindInvalid, "generation_configs[1].prompt_template: has placeholders {x}"},
		{"select without options", cfg(`{"prompt_template":"{s}","fields":[{"key":"s","label":"S","type":"select"}]}`), models.KindInvalid, "generation_configs[0].fields[0].options: a select field needs at least one option"},
		{"select empty options", cfg(`{"prompt_template":"{s}","fields":[{"key":"s","label":"S","type":"select","options":[]}]}`), models.KindInvalid, "fields[0].options: a select field needs at least one option"},
		{"select bad option", cfg(`{"prompt_template":"{s}","fields":[{"key":"s","label":"S","type":"select","options":[1]}]}`), models.KindInvalid, `fields[0].options[0]: an option must be a string "value|label"`},
		{"field label required", cfg(`{"prompt_template":"{a}","fields":[{"key":"a"}]}`), models.KindInvalid, "fields[0].label: a label is required"},
		{"field type unknown", cfg(`{"prompt_template":"{a}","fields":[{"key":"a","label":"A","type":"number"}]}`), models.KindInvalid, `fields[0].type: unknown type "number"`},
		{"both modes", cfg(`{"prompt_template":"x","skill_spec_md":"# Spec"}`), models.KindInvalid, "not both"},
		{"no mode", cfg(`{"model":"auto"}`), models.KindInvalid, "needs prompt_template (form mode) or skill_spec_md (spec mode)"},
		{"fields in spec mode", cfg(`{"skill_spec_md":"# Spec","fields":[{"key":"a","label":"A"}]}`), models.KindInvalid, "fields are only used with prompt_template"},
		{"unknown quality", cfg(`{"skill_spec_md":"# S","quality":"best"}`), models.KindInvalid, `quality: unknown quality "best"`},
		{"model with space", cfg(`{"skill_spec_md":"# S","model":"gen 2"}`), models.KindInvalid, `model: "gen 2" is not a model name`},
		{"reference image not a URL", cfg(`{"skill_spec_md":"# S","default_reference_images":["/a.png"]}`), models.KindInvalid, "default_reference_images[0]"},
		{"bad ratio", with(func(in *models.TemplateInput) { in.Ratio = "3x4" }), models.KindInvalid, `ratio: "3x4" is not an aspect ratio`},
		{"bad sample image", with(func(in *models.TemplateInput) { in.SampleImages = []string{"ftp://x/a.png"} }), models.KindInvalid, "sample_images[0]"},
		{"bad variable label key", with(func(in *models.TemplateInput) { in.VariableLabels = map[string]string{"1a": "x"} }), models.KindInvalid, "variable_labels"},
		{"slug upper case", with(func(in *models.TemplateInput) { in.Slug = "Spring" }), models.KindInvalid, `slug "Spring" is invalid`},
		{"slug leading dash", with(func(in *models.TemplateInput) { in.Slug = "-spring" }), models.KindInvalid, "is invalid"},
		{"slug too short", with(func(in *models.TemplateInput) { in.Slug = "a" }), models.KindInvalid, "is invalid"},
		{"slug too long", with(func(in *models.TemplateInput) { in.Slug = strings.Repeat("a", 65) }), models.KindInvalid, "is invalid"},
		{"slug underscore", with(func(in *models.TemplateInput) { in.Slug = "a_b" }), models.KindInvalid, "is invalid"},
		{"slug is a uuid", with(func(in *models.TemplateInput) { in.Slug = models.NewID() }), models.KindInvalid, "must not be a UUID"},
		{"gated refused", with(func(in *models.TemplateInput) { f := false; in.Gated = &f }), models.KindInvalid, "gated cannot be set or changed here"},
		{"article needs format", article(`{"prompt_template":"copy"}`), models.KindInvalid, "generation_configs[0].format: a format is required"},
		{"article unknown format", article(`{"format":"weibo","prompt_template":"copy"}`), models.KindInvalid, `unknown format "weibo"`},
		{"article refuses ratio", func() models.TemplateInput {
			in := article(`{"format":"wechat","skill_spec_md":"# S"}`)
			in.Ratio = "1:1"
			return in
		}(), models.KindInvalid, "ratio is only used by image templates"},
		{"article template_type", func() models.TemplateInput {
			in := article(`{"format":"wechat","skill_spec_md":"# S"}`)
			in.TemplateType = "poster"
			return in
		}(), models.KindInvalid, "template_type of a copy template is always article"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			view, err := app.Templates().CreateTemplate(context.Background(), tenant, tt.in)
			wantErr(t, err, tt.kind, tt.msg)
			if err == nil && (view.Source != "mine" || view.ZhName == "") {
				t.Fatalf("created view = %+v", view)
			}
		})
	}
	var n int64
	app.DB.Gorm.Model(&models.Template{}).Count(&n)
	if want := int64(9); n != want {
		t.Fatalf("templates stored = %d, want %d (only the valid ones)", n, want)
	}
}

func TestCreateTemplateOwnershipAndSlugs(t *testing.T) {
	app := tplApp(t)
	ctx := context.Background()
	tenant := tplTenant(t, app, "Acme")
	member := &models.Identity{Kind: models.IdentityAccount, TenantID: tenant.TenantID, AccountID: models.NewID()}
	user := tplUser(t, app)
	spec := configs(`{"skill_spec_md":"# S"}`)

	_, err := app.Templates().CreateTemplate(ctx, member, imageInput(spec))
	wantErr(t, err, models.KindForbidden, "member account key cannot create")

	in := imageInput(spec)
	in.Slug = "shared-slug"
	tv, err := app.Templates().CreateTemplate(ctx, tenant, in)
	wantErr(t, err, 0, "")
	// Image and copy templates share one slug namespace, across owners.
	art := models.TemplateInput{Type: "article", ZhName: "文案", Slug: "shared-slug", GenerationConfigs: configs(`{"format":"wechat","skill_spec_md":"# S"}`)}
	_, err = app.Templates().CreateTemplate(ctx, user, art)
	wantErr(t, err, models.KindConflict, `slug "shared-slug" is already taken`)
	_, err = app.Templates().CreateTemplate(ctx, tplAdmin, in)
	wantErr(t, err, models.KindConflict, "already taken")
	// Video templates have their own namespace.
	_, err = app.Templates().CreateVideoTemplate(ctx, tenant, models.VideoTemplateInput{Slug: "shared-slug", ZhName: "视频", GenerationConfigs: configs(`{"skill_spec_md":"# S"}`)})
	wantErr(t, err, 0, "")

	var stored models.Template
	app.DB.Gorm.First(&stored, "id = ?", tv.ID)
	if stored.TenantID == nil || *stored.TenantID != tenant.TenantID || stored.UserID != nil || stored.AuthorKind != "tenant" || stored.AuthorID != tenant.TenantID {
		t.Fatalf("tenant template ownership = %+v", stored)
	}
	uv, err := app.Templates().CreateTemplate(ctx, user, imageInput(spec))
	wantErr(t, err, 0, "")
	stored = models.Template{}
	app.DB.Gorm.First(&stored, "id = ?", uv.ID)
	if stored.TenantID != nil || stored.UserID == nil || *stored.UserID != user.UserID || stored.AuthorKind != "user" {
		t.Fatalf("personal template ownership = %+v", stored)
	}
	av, err := app.Templates().CreateTemplate(ctx, tplAdmin, imageInput(spec))
	wantErr(t, err, 0, "")
	stored = models.Template{}
	app.DB.Gorm.First(&stored, "id = ?", av.ID)
	if !stored.IsPlatform() || stored.AuthorKind != "admin" || av.Source != "platform" {
		t.Fatalf("platform template = %+v, view source %q", stored, av.Source)
	}

	// A slug change onto a taken slug is 409 as well; keeping one's own slug is fine.
	_, err = app.Templates().UpdateTemplate(ctx, user, models.TemplatePatch{ID: uv.ID, Slug: ptrTo("shared-slug")})
	wantErr(t, err, models.KindConflict, "already taken")
	_, err = app.Templates().UpdateTemplate(ctx, tenant, models.TemplatePatch{ID: tv.ID, Slug: ptrTo("shared-slug"), ZhName: ptrTo("新名字")})
	wantErr(t, err, 0, "")
}

func ptrTo[T any](v T) *T { return &v }

func TestCreateTemplateTxJoinsTheCallersTransaction(t *testing.T) {
	app := tplApp(t)
	tenant := tplTenant(t, app, "Acme")
	boom := errors.New("rollback")
	err := app.Tx(context.Background(), func(tx *gorm.DB) error {
		if _, err := app.Templates().CreateTemplateTx(tx, tenant, imageInput(configs(`{"skill_spec_md":"# S"}`))); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("tx error = %v", err)
	}
	var n int64
	app.DB.Gorm.Model(&models.Template{}).Count(&n)
	if n != 0 {
		t.Fatalf("templates after rollback = %d, want 0", n)
	}
}

func TestUpdateTemplateRules(t *testing.T) {
	app := tplApp(t)
	ctx := context.Background()
	a, b := tplTenant(t, app, "A"), tplTenant(t, app, "B")
	tv, err := app.Templates().CreateTemplate(ctx, a, imageInput(configs(`{"prompt_template":"{title}","fields":[{"key":"title","label":"T"}]}`)))
	wantErr(t, err, 0, "")
	pv, err := app.Templates().CreateTemplate(ctx, tplAdmin, imageInput(configs(`{"skill_spec_md":"# S"}`)))
	wantErr(t, err, 0, "")

	tests := []struct {
		name string
		id   *models.Identity
		p    models.TemplatePatch
		kind models.Kind
		msg  string
	}{
		{"id required", a, models.TemplatePatch{ZhName: ptrTo("x")}, models.KindInvalid, "id is required"},
		{"nothing to change", a, models.TemplatePatch{ID: tv.ID}, models.KindInvalid, "nothing to change"},
		{"another tenant's template", b, models.TemplatePatch{ID: tv.ID, ZhName: ptrTo("x")}, models.KindNotFound, "template not found"},
		{"unknown id", a, models.TemplatePatch{ID: models.NewID(), ZhName: ptrTo("x")}, models.KindNotFound, "template not found"},
		{"platform template by tenant", a, models.TemplatePatch{ID: pv.ID, ZhName: ptrTo("x")}, models.KindForbidden, "platform administrator"},
		{"gated false", a, models.TemplatePatch{ID: tv.ID, Gated: ptrTo(false)}, models.KindInvalid, "gating cannot be undone"},
		{"type change", a, models.TemplatePatch{ID: tv.ID, Type: ptrTo("article")}, models.KindInvalid, "type cannot be changed"},
		{"validated like creation", a, models.TemplatePatch{ID: tv.ID, GenerationConfigs: configs(`{"prompt_template":"{title} {x}","fields":[{"key":"title","label":"T"}]}`)}, models.KindInvalid, "placeholder {x} is not declared"},
		{"empty zh_name", a, models.TemplatePatch{ID: tv.ID, ZhName: ptrTo("")}, models.KindInvalid, "zh_name is required"},
		{"slug removal", a, models.TemplatePatch{ID: tv.ID, Slug: ptrTo("")}, models.KindInvalid, "slug cannot be removed"},
		{"owner changes", a, models.TemplatePatch{ID: tv.ID, Description: ptrTo("new"), Ratio: ptrTo("9:16")}, 0, ""},
		{"admin changes platform", tplAdmin, models.TemplatePatch{ID: pv.ID, Active: ptrTo(false)}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := app.Templates().UpdateTemplate(ctx, tt.id, tt.p)
			wantErr(t, err, tt.kind, tt.msg)
		})
	}
	var got models.Template
	app.DB.Gorm.First(&got, "id = ?", tv.ID)
	if got.Description != "new" || got.Ratio != "9:16" || got.ZhName != "海报" {
		t.Fatalf("after patch: %+v", got)
	}
	// The deactivated platform template is gone for tenants, still listed to the administrator.
	rows, err := app.Templates().ListTemplates(ctx, a, models.TemplateFilter{Source: "platform"})
	wantErr(t, err, 0, "")
	if len(rows) != 0 {
		t.Fatalf("tenant sees %d platform templates after deactivation, want 0", len(rows))
	}
	rows, _ = app.Templates().ListTemplates(ctx, tplAdmin, models.TemplateFilter{})
	if len(rows) != 1 || rows[0].Active {
		t.Fatalf("admin listing = %+v", rows)
	}
}

func TestFormPromptSubstitutionThroughCreation(t *testing.T) {
	app := tplApp(t)
	ctx := context.Background()
	tenant := tplTenant(t, app, "Acme")
	create := func(t *testing.T, prompt, fields string) *models.Template {
		t.Helper()
		cfg, _ := json.Marshal(map[string]any{"prompt_template": prompt, "fields": json.RawMessage(fields)})
		v, err := app.Templates().CreateTemplate(ctx, tenant, imageInput(configs(string(cfg))))
		if err != nil {
			t.Fatalf("create %q: %v", prompt, err)
		}
		tpl, err := app.Templates().TemplateForUse(ctx, tenant, models.TemplateRef{ID: v.ID})
		if err != nil {
			t.Fatalf("for use: %v", err)
		}
		return tpl
	}
	ab := `[{"key":"a","label":"A"},{"key":"b","label":"B"}]`
	tests := []struct {
		name    string
		prompt  string
		fields  string
		input   string
		want    string
		wantErr string
	}{
		{"repeated keys", "{a} and {a} again, {a}", `[{"key":"a","label":"A"}]`, `{"a":"cat"}`, "cat and cat again, cat", ""},
		{"adjacent placeholders", "{a}{b}{a}", ab, `{"a":"x","b":"y"}`, "xyx", ""},
		{"braces in values are not re-scanned", "{a}-{b}", ab, `{"a":"{b}","b":"}{a}{"}`, "{b}-}{a}{", ""},
		{"literal braces around a placeholder", "{{a}} {not a key} {1a} {}", `[{"key":"a","label":"A"}]`, `{"a":"v"}`, "{v} {not a key} {1a} {}", ""},
		{"prefix key does not match longer key", "{title} / {title_2}", `[{"key":"title","label":"T"},{"key":"title_2","label":"T2"}]`, `{"title":"A","title_2":"B"}`, "A / B", ""},
		{"optional field left empty", "[{a}][{b}]", `[{"key":"a","label":"A"},{"key":"b","label":"B","required":false}]`, `{"a":"x"}`, "[x][]", ""},
		{"optional field null", "[{a}][{b}]", `[{"key":"a","label":"A"},{"key":"b","label":"B","required":false}]`, `{"a":"x","b":null}`, "[x][]", ""},
		{"numbers and booleans verbatim", "{a} {b}", ab, `{"a":1.50,"b":true}`, "1.50 true", ""},
		{"unicode and JSON-looking values", "海报：{a}", `[{"key":"a","label":"A"}]`, `{"a":"{\"k\": 1} 红色"}`, `海报：{"k": 1} 红色`, ""},
		{"undeclared input keys ignored", "{a}", `[{"key":"a","label":"A"}]`, `{"a":"x","zzz":"y"}`, "x", ""},
		{"select value", "size {s}", `[{"key":"s","label":"S","type":"select","options":["l|Large",{"label":"Medium","value":"m"}]}]`, `{"s":"m"}`, "size m", ""},
		{"select value not an option", "size {s}", `[{"key":"s","label":"S","type":"select","options":["l|Large"]}]`, `{"s":"Large"}`, "", `input.s: "Large" is not an option; use "l"`},
		{"required field missing", "{a}{b}", ab, `{"b":"y"}`, "", "missing required field: a"},
		{"required fields blank", "{a}{b}", ab, `{"a":" ","b":""}`, "", "missing required fields: a, b"},
		{"object value refused", "{a}", `[{"key":"a","label":"A"}]`, `{"a":{"x":1}}`, "", "input.a: must be a string, number or boolean, not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := create(t, tt.prompt, tt.fields)
			var input map[string]any
			dec := json.NewDecoder(strings.NewReader(tt.input))
			dec.UseNumber()
			if err := dec.Decode(&input); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ { // deterministic: the same input gives the same prompt
				got, err := tpl.FormPrompt(input)
				if tt.wantErr != "" {
					wantErr(t, err, models.KindInvalid, tt.wantErr)
					continue
				}
				if err != nil || got != tt.want {
					t.Fatalf("FormPrompt = %q, %v; want %q", got, err, tt.want)
				}
			}
		})
	}

	spec, err := app.Templates().CreateTemplate(ctx, tenant, imageInput(configs(`{"skill_spec_md":"# S"}`)))
	wantErr(t, err, 0, "")
	tpl, _ := app.Templates().TemplateForUse(ctx, tenant, models.TemplateRef{ID: spec.ID})
	_, err = tpl.FormPrompt(map[string]any{})
	wantErr(t, err, models.KindInvalid, "one-sentence description")

	art, err := app.Templates().CreateTemplate(ctx, tenant, models.TemplateInput{Type: "article", ZhName: "文案", Slug: "note",
		GenerationConfigs: configs(`{"format":"xiaohongshu","prompt_template":"写一篇关于{subject}的笔记","fields":[{"key":"subject","label":"主题"}]}`)})
	wantErr(t, err, 0, "")
	at, err := app.Templates().ArticleTemplateForUse(ctx, tenant, "note")
	wantErr(t, err, 0, "")
	if got, err := at.FormPrompt(map[string]any{"subject": "咖啡"}); err != nil || got != "写一篇关于咖啡的笔记" || at.ID != art.ID {
		t.Fatalf("article FormPrompt = %q, %v", got, err)
	}
	if _, err := at.ImageConfigs(); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("ImageConfigs of an article template: %v", err)
	}
}

func TestVideoTemplateValidation(t *testing.T) {
	app := tplApp(t)
	ctx := context.Background()
	tenant := tplTenant(t, app, "Acme")
	n := 0
	in := func(slug, cfg string) models.VideoTemplateInput {
		return models.VideoTemplateInput{Slug: slug, ZhName: "视频", GenerationConfigs: configs(cfg)}
	}
	slug := func() string { n++; return "video-" + string(rune('a'+n)) }
	tests := []struct {
		name string
		in   models.VideoTemplateInput
		kind models.Kind
		msg  string
	}{
		{"auto", in(slug(), `{"model":"auto","ratio":"16:9","duration":10,"skill_spec_md":"# S"}`), 0, ""},
		{"model omitted means auto", in(slug(), `{"duration":20,"skill_spec_md":"# S"}`), 0, ""},
		{"locked tier fits", in(slug(), `{"model":"vidA-2-5-pro-260801","ratio":"9:16","duration":30,"resolution":"1080p","prompt_template":"a {subject}","fields":[{"key":"subject","label":"S"}]}`), 0, ""},
		{"slug required", in("", `{"skill_spec_md":"# S"}`), models.KindInvalid, "slug is required for a video template"},
		{"slug syntax", in("Bad Slug", `{"skill_spec_md":"# S"}`), models.KindInvalid, "is invalid"},
		{"zh_name required", models.VideoTemplateInput{Slug: slug(), GenerationConfigs: configs(`{"skill_spec_md":"# S"}`)}, models.KindInvalid, "zh_name is required"},
		{"unknown tier", in(slug(), `{"model":"vidC","skill_spec_md":"# S"}`), models.KindInvalid, `generation_configs[0].model: unknown video model "vidC"`},
		{"locked tier duration", in(slug(), `{"model":"vidA-2-0-fast-260801","duration":20,"skill_spec_md":"# S"}`), models.KindInvalid, "duration: 20 s is outside 4–15 s"},
		{"locked tier resolution", in(slug(), `{"model":"vidB-H3","duration":5,"resolution":"1080p","skill_spec_md":"# S"}`), models.KindInvalid, "resolution: 1080p is not offered by tier vidB-H3"},
		{"auto no tier fits", in(slug(), `{"duration":20,"resolution":"2K","skill_spec_md":"# S"}`), models.KindInvalid, "no video tier offers 20 s at 2K"},
		{"bad ratio", in(slug(), `{"ratio":"16x9","skill_spec_md":"# S"}`), models.KindInvalid, "ratio"},
		{"placeholders without fields", in(slug(), `{"prompt_template":"a {subject}"}`), models.KindInvalid, "has placeholders {subject} but no fields"},
		{"bad cover URL", models.VideoTemplateInput{Slug: slug(), ZhName: "视频", SampleCoverImage: "cover.png", GenerationConfigs: configs(`{"skill_spec_md":"# S"}`)}, models.KindInvalid, "sample_cover_image"},
		{"gated refused", models.VideoTemplateInput{Slug: slug(), ZhName: "视频", Gated: ptrTo(true), GenerationConfigs: configs(`{"skill_spec_md":"# S"}`)}, models.KindInvalid, "gated cannot be set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := app.Templates().CreateVideoTemplate(ctx, tenant, tt.in)
			wantErr(t, err, tt.kind, tt.msg)
		})
	}
	vt, err := app.Templates().VideoTemplateForUse(ctx, tenant, "video-c")
	wantErr(t, err, 0, "")
	cfgs, err := vt.VideoConfigs()
	if err != nil || cfgs[0].Model != "auto" {
		t.Fatalf("model omitted stored as %q (%v), want auto", cfgs[0].Model, err)
	}
	byID, err := app.Templates().VideoTemplateForUse(ctx, tenant, vt.ID)
	if err != nil || byID.ID != vt.ID {
		t.Fatalf("by id: %v", err)
	}
	locked, _ := app.Templates().VideoTemplateForUse(ctx, tenant, "video-d")
	if got, err := locked.FormPrompt(map[string]any{"subject": "cat"}); err != nil || got != "a cat" {
		t.Fatalf("video FormPrompt = %q, %v", got, err)
	}
	_, err = app.Templates().UpdateVideoTemplate(ctx, tenant, models.VideoTemplatePatch{ID: vt.ID, GenerationConfigs: configs(`{"model":"vidA-2-0-pro-260801","resolution":"720p","skill_spec_md":"# S"}`)})
	wantErr(t, err, models.KindInvalid, "720p is not offered")
	_, err = app.Templates().UpdateVideoTemplate(ctx, tenant, models.VideoTemplatePatch{ID: vt.ID, Slug: ptrTo("video-d")})
	wantErr(t, err, models.KindConflict, "already taken")
}

// visibilityFixture is a small world: two tenants, a member of A, two personal logins, and templates of
// every kind of owner.
type visibilityFixture struct {
	app                          *models.App
	a, b, member, buyer, other   *models.Identity
	aTpl, platform, gated, inact string
}

func newVisibilityFixture(t *testing.T) *visibilityFixture {
	t.Helper()
	app := tplApp(t)
	ctx := context.Background()
	f := &visibilityFixture{app: app, a: tplTenant(t, app, "A"), b: tplTenant(t, app, "B"), buyer: tplUser(t, app), other: tplUser(t, app)}
	f.member = &models.Identity{Kind: models.IdentityAccount, TenantID: f.a.TenantID, AccountID: models.NewID()}
	mk := func(owner *models.Identity, slug, cfg string) string {
		in := imageInput(configs(cfg))
		in.Slug = slug
		in.SampleImages = []string{"https://cdn.example.com/" + slug + ".png"}
		v, err := app.Templates().CreateTemplate(ctx, owner, in)
		if err != nil {
			t.Fatalf("create %s: %v", slug, err)
		}
		return v.ID
	}
	f.aTpl = mk(f.a, "a-own", `{"skill_spec_md":"# A spec"}`)
	f.platform = mk(tplAdmin, "plat", `{"prompt_template":"platform {title}","fields":[{"key":"title","label":"T"}]}`)
	f.gated = mk(tplAdmin, "gated", `{"prompt_template":"secret {title}","fields":[{"key":"title","label":"T"}],"default_reference_images":["https://cdn.example.com/ref.png"]}`)
	f.inact = mk(tplAdmin, "inactive", `{"skill_spec_md":"# S"}`)
	if _, err := app.Templates().UpdateTemplate(ctx, tplAdmin, models.TemplatePatch{ID: f.inact, Active: ptrTo(false)}); err != nil {
		t.Fatal(err)
	}
	err := app.Tx(ctx, func(tx *gorm.DB) error { return app.Templates().GateTemplatesTx(tx, []string{f.gated, f.gated}) })
	if err != nil {
		t.Fatalf("gate: %v", err)
	}
	if err := app.DB.Gorm.Create(&models.TemplateGrant{UserID: f.buyer.UserID, TemplateID: f.gated, Code: "promo-x"}).Error; err != nil {
		t.Fatal(err)
	}
	return f
}

func TestVisibilityRule(t *testing.T) {
	f := newVisibilityFixture(t)
	app, ctx := f.app, context.Background()
	type row struct{ source, locked string }
	list := func(id *models.Identity, filter models.TemplateFilter) map[string]row {
		t.Helper()
		rows, err := app.Templates().ListTemplates(ctx, id, filter)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]row{}
		for _, r := range rows {
			out[*r.Slug] = row{r.Source, map[bool]string{true: "locked", false: "open"}[r.Locked]}
		}
		return out
	}
	tests := []struct {
		name   string
		id     *models.Identity
		filter models.TemplateFilter
		want   map[string]row
	}{
		{"owner tenant, all", f.a, models.TemplateFilter{}, map[string]row{"a-own": {"mine", "open"}, "plat": {"platform", "open"}, "gated": {"platform", "locked"}}},
		{"owner tenant, mine", f.a, models.TemplateFilter{Source: "mine"}, map[string]row{"a-own": {"mine", "open"}}},
		{"owner tenant, platform", f.a, models.TemplateFilter{Source: "platform", Type: "image"}, map[string]row{"plat": {"platform", "open"}, "gated": {"platform", "locked"}}},
		{"member of the owner", f.member, models.TemplateFilter{}, map[string]row{"a-own": {"mine", "open"}, "plat": {"platform", "open"}, "gated": {"platform", "locked"}}},
		{"other tenant", f.b, models.TemplateFilter{}, map[string]row{"plat": {"platform", "open"}, "gated": {"platform", "locked"}}},
		{"grant holder", f.buyer, models.TemplateFilter{}, map[string]row{"plat": {"platform", "open"}, "gated": {"platform", "open"}}},
		{"other person", f.other, models.TemplateFilter{}, map[string]row{"plat": {"platform", "open"}, "gated": {"platform", "locked"}}},
		{"administrator", tplAdmin, models.TemplateFilter{}, map[string]row{"plat": {"platform", "open"}, "gated": {"platform", "open"}, "inactive": {"platform", "open"}}},
		{"administrator, mine", tplAdmin, models.TemplateFilter{Source: "mine"}, map[string]row{}},
		{"articles only", f.a, models.TemplateFilter{Type: "article"}, map[string]row{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := list(tt.id, tt.filter)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, w := range tt.want {
				if got[k] != w {
					t.Fatalf("%s: got %v, want %v (all: %v)", k, got[k], w, got)
				}
			}
		})
	}
	_, err := app.Templates().ListTemplates(ctx, f.a, models.TemplateFilter{Type: "video"})
	wantErr(t, err, models.KindInvalid, "type must be image or article")
	_, err = app.Templates().ListTemplates(ctx, f.a, models.TemplateFilter{Source: "public"})
	wantErr(t, err, models.KindInvalid, "source must be mine, platform or all")

	// Generation follows the same rule.
	use := []struct {
		name string
		id   *models.Identity
		ref  models.TemplateRef
		kind models.Kind
		msg  string
	}{
		{"own by id", f.a, models.TemplateRef{ID: f.aTpl}, 0, ""},
		{"own spec skill by slug", f.member, models.TemplateRef{SkillSlug: "a-own"}, 0, ""},
		{"platform by slug", f.b, models.TemplateRef{Slug: "plat"}, 0, ""},
		{"another tenant's", f.b, models.TemplateRef{ID: f.aTpl}, models.KindNotFound, "template not found"},
		{"inactive", f.a, models.TemplateRef{Slug: "inactive"}, models.KindNotFound, "template not found"},
		{"unknown", f.a, models.TemplateRef{Slug: "nope"}, models.KindNotFound, "template not found"},
		{"gated without a claim", f.b, models.TemplateRef{Slug: "gated"}, models.KindForbidden, "template is locked"},
		{"gated with a grant", f.buyer, models.TemplateRef{Slug: "gated"}, 0, ""},
		{"two refs", f.a, models.TemplateRef{ID: f.aTpl, Slug: "a-own"}, models.KindInvalid, "exactly one"},
		{"no ref", f.a, models.TemplateRef{}, models.KindInvalid, "exactly one"},
	}
	for _, tt := range use {
		t.Run("use "+tt.name, func(t *testing.T) {
			_, err := app.Templates().TemplateForUse(ctx, tt.id, tt.ref)
			wantErr(t, err, tt.kind, tt.msg)
		})
	}

	// The tenant recorded on a claim code bundling the gated template sees it in full.
	ids, _ := json.Marshal([]string{f.gated})
	if err := app.DB.Gorm.Create(&models.ClaimCode{Code: "promo-b1", TenantID: f.b.TenantID, Credits: 1, TemplateIDs: datatypes.JSON(ids)}).Error; err != nil {
		t.Fatal(err)
	}
	if got := list(f.b, models.TemplateFilter{}); got["gated"].locked != "open" {
		t.Fatalf("claim-code tenant sees gated as %v, want open", got["gated"])
	}
	if _, err := app.Templates().TemplateForUse(ctx, f.b, models.TemplateRef{Slug: "gated"}); err != nil {
		t.Fatalf("claim-code tenant use: %v", err)
	}
}

func TestTemplateViewStripsPromptText(t *testing.T) {
	f := newVisibilityFixture(t)
	app, ctx := f.app, context.Background()
	find := func(id *models.Identity, slug string) models.TemplateView {
		t.Helper()
		rows, err := app.Templates().ListTemplates(ctx, id, models.TemplateFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Slug != nil && *r.Slug == slug {
				return r
			}
		}
		t.Fatalf("%s not listed", slug)
		return models.TemplateView{}
	}
	cfg := func(v models.TemplateView) models.ImageConfigView {
		return v.GenerationConfigs.([]models.ImageConfigView)[0]
	}

	own := cfg(find(f.a, "a-own"))
	if own.SkillSpecMD == nil || *own.SkillSpecMD != "# A spec" || own.Mode != "spec" {
		t.Fatalf("author sees %+v, want its skill_spec_md", own)
	}
	if m := cfg(find(f.member, "a-own")); m.SkillSpecMD != nil || m.Mode != "spec" {
		t.Fatalf("member account sees skill_spec_md: %+v", m)
	}
	locked := find(f.b, "gated")
	if c := cfg(locked); !locked.Locked || c.PromptTemplate != nil || c.DefaultReferenceImages != nil || len(locked.SampleImages) != 0 {
		t.Fatalf("locked view leaks: %+v %+v", locked, c)
	}
	open := find(f.buyer, "gated")
	if c := cfg(open); open.Locked || c.PromptTemplate == nil || *c.PromptTemplate != "secret {title}" || len(c.DefaultReferenceImages) != 1 || len(open.SampleImages) != 1 {
		t.Fatalf("grant holder view: %+v %+v", open, c)
	}
	if c := cfg(find(f.b, "plat")); c.PromptTemplate == nil {
		t.Fatalf("ungated platform template hides its prompt: %+v", c)
	}
}

func TestSkills(t *testing.T) {
	f := newVisibilityFixture(t)
	app, ctx := f.app, context.Background()
	mk := func(slug, cfg string, images ...string) {
		in := imageInput(configs(cfg))
		in.Slug, in.Ratio, in.Genre, in.Description, in.SampleImages = slug, "3:4", "poster", "one line", images
		if _, err := app.Templates().CreateTemplate(ctx, tplAdmin, in); err != nil {
			t.Fatalf("create %s: %v", slug, err)
		}
	}
	mk("form-skill", `{"prompt_template":"{title} {body}","fields":[{"key":"title","label":"T"},{"key":"body","label":"B","type":"textarea"}],"ref_required":true}`, "https://cdn.example.com/1.png", "https://cdn.example.com/2.png")
	mk("select-form", `{"prompt_template":"{s}","fields":[{"key":"s","label":"S","type":"select","options":["a"]}]}`)
	if _, err := app.Templates().CreateTemplate(ctx, tplAdmin, imageInput(configs(`{"skill_spec_md":"# no slug"}`))); err != nil {
		t.Fatal(err)
	}
	skills, err := app.Templates().ListSkills(ctx, f.b)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for _, s := range skills {
		slugs = append(slugs, s.Slug)
	}
	if got, want := strings.Join(slugs, ","), "form-skill,plat"; got != want {
		t.Fatalf("skills of B = %s, want %s (no gated, inactive, select-form, slugless or other tenants' skills)", got, want)
	}
	fs := skills[0]
	if fs.Thumb == nil || *fs.Thumb != "https://cdn.example.com/1.png" || !fs.RefRequired || len(fs.Fields) != 2 || fs.Ratio != "3:4" || fs.Genre != "poster" {
		t.Fatalf("form skill = %+v", fs)
	}
	skills, _ = app.Templates().ListSkills(ctx, f.a)
	var aOwn *models.Skill
	for i := range skills {
		if skills[i].Slug == "a-own" {
			aOwn = &skills[i]
		}
	}
	if aOwn == nil || aOwn.Fields != nil {
		t.Fatalf("tenant A's spec skill = %+v, want listed with fields nil", aOwn)
	}
	skills, _ = app.Templates().ListSkills(ctx, f.buyer)
	if len(skills) != 3 { // form-skill, gated (claimed), plat
		t.Fatalf("grant holder skills = %+v", skills)
	}
	if _, err := app.Templates().TemplateForUse(ctx, f.b, models.TemplateRef{SkillSlug: "select-form"}); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("select form by skill_slug: %v, want not found", err)
	}
	if _, err := app.Templates().TemplateForUse(ctx, f.b, models.TemplateRef{Slug: "select-form"}); err != nil {
		t.Fatalf("select form by template_slug: %v", err)
	}
}

func TestGateTemplatesTxAndDelete(t *testing.T) {
	app := tplApp(t)
	ctx := context.Background()
	tenant := tplTenant(t, app, "Acme")
	v, err := app.Templates().CreateTemplate(ctx, tplAdmin, imageInput(configs(`{"skill_spec_md":"# S"}`)))
	wantErr(t, err, 0, "")
	vt, err := app.Templates().CreateVideoTemplate(ctx, tplAdmin, models.VideoTemplateInput{Slug: "clip", ZhName: "视频", GenerationConfigs: configs(`{"skill_spec_md":"# S"}`)})
	wantErr(t, err, 0, "")

	err = app.Tx(ctx, func(tx *gorm.DB) error { return app.Templates().GateTemplatesTx(tx, []string{v.ID, models.NewID()}) })
	wantErr(t, err, models.KindNotFound, "template not found")
	var got models.Template
	app.DB.Gorm.First(&got, "id = ?", v.ID)
	if got.Gated {
		t.Fatal("gated after a failed GateTemplatesTx")
	}
	err = app.Tx(ctx, func(tx *gorm.DB) error { return app.Templates().GateTemplatesTx(tx, []string{v.ID, vt.ID}) })
	wantErr(t, err, 0, "")
	rows, _ := app.Templates().ListVideoTemplates(ctx, tenant, "")
	if len(rows) != 1 || !rows[0].Locked || rows[0].GenerationConfigs[0].SkillSpecMD != nil {
		t.Fatalf("gated video template for a tenant: %+v", rows)
	}
	if _, err := app.Templates().VideoTemplateForUse(ctx, tenant, "clip"); models.KindOf(err) != models.KindForbidden {
		t.Fatalf("locked video template use: %v", err)
	}

	body := func(id string) []byte {
		b, _ := json.Marshal(map[string]any{"action": "template-delete", "id": id})
		return b
	}
	for _, id := range []string{v.ID, vt.ID} {
		out, err := app.Admin.Run(ctx, models.Operator(), body(id))
		if err != nil || out.(map[string]any)["ok"] != true {
			t.Fatalf("template-delete %s: %v %v", id, out, errors.Unwrap(err))
		}
	}
	_, err = app.Admin.Run(ctx, models.Operator(), body(v.ID))
	wantErr(t, err, models.KindNotFound, "template not found")
	_, err = app.Admin.Run(ctx, models.Operator(), body(""))
	wantErr(t, err, models.KindInvalid, "id is required")
}

func TestHooks(t *testing.T) {
	app := tplApp(t)
	ctx := context.Background()
	a, b := tplTenant(t, app, "A"), tplTenant(t, app, "B")
	mk := func(owner *models.Identity, typ, slug, cfg string) {
		t.Helper()
		if _, err := app.Templates().CreateTemplate(ctx, owner, models.TemplateInput{Type: typ, Slug: slug, ZhName: "x", GenerationConfigs: configs(cfg)}); err != nil {
			t.Fatalf("create %s: %v", slug, err)
		}
	}
	mk(a, "image", "poster", `{"skill_spec_md":"# S"}`)
	mk(b, "image", "b-poster", `{"skill_spec_md":"# S"}`)
	mk(tplAdmin, "article", "copy", `{"format":"wechat","skill_spec_md":"# S"}`)
	mk(b, "article", "b-copy", `{"format":"wechat","skill_spec_md":"# S"}`)
	if _, err := app.Templates().CreateVideoTemplate(ctx, a, models.VideoTemplateInput{Slug: "clip", ZhName: "v", GenerationConfigs: configs(`{"skill_spec_md":"# S"}`)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   models.HookInput
		kind models.Kind
		msg  string
	}{
		{"hook_type required", models.HookInput{ImageTemplateSlug: "poster", HookTemplateSlug: "copy"}, models.KindInvalid, "hook_type is required"},
		{"hook_type unknown", models.HookInput{ImageTemplateSlug: "poster", HookType: "audio", HookTemplateSlug: "copy"}, models.KindInvalid, "hook_type must be article or video"},
		{"image template of another tenant", models.HookInput{ImageTemplateSlug: "b-poster", HookType: "article", HookTemplateSlug: "copy"}, models.KindInvalid, `image_template_slug "b-poster" names no image template`},
		{"image slug names a copy template", models.HookInput{ImageTemplateSlug: "copy", HookType: "article", HookTemplateSlug: "copy"}, models.KindInvalid, "names no image template"},
		{"article target of another tenant", models.HookInput{ImageTemplateSlug: "poster", HookType: "article", HookTemplateSlug: "b-copy"}, models.KindInvalid, "names no copy (article) template"},
		{"article target is a video template", models.HookInput{ImageTemplateSlug: "poster", HookType: "article", HookTemplateSlug: "clip"}, models.KindInvalid, "names no copy (article) template"},
		{"video target is a copy template", models.HookInput{ImageTemplateSlug: "poster", HookType: "video", HookTemplateSlug: "copy"}, models.KindInvalid, "names no video template"},
		{"article ok", models.HookInput{ImageTemplateSlug: "poster", HookType: "article", HookTemplateSlug: "copy"}, 0, ""},
		{"video ok", models.HookInput{ImageTemplateSlug: "poster", HookType: "video", HookTemplateSlug: "clip", Enabled: ptrTo(false), Note: "later"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := app.Accounts().UpsertHook(ctx, a, tt.in)
			wantErr(t, err, tt.kind, tt.msg)
		})
	}
	member := &models.Identity{Kind: models.IdentityAccount, TenantID: a.TenantID, AccountID: models.NewID()}
	if _, err := app.Accounts().ListHooks(ctx, member, ""); models.KindOf(err) != models.KindForbidden {
		t.Fatalf("member ListHooks: %v", err)
	}
	hooks, err := app.Accounts().ListHooks(ctx, a, "poster")
	if err != nil || len(hooks) != 2 || hooks[0].HookType != "article" || !hooks[0].Enabled || hooks[1].Enabled || hooks[1].Note != "later" {
		t.Fatalf("hooks = %+v, %v", hooks, err)
	}
	_, err = app.Accounts().UpdateHook(ctx, b, models.HookPatch{ID: hooks[0].ID, Enabled: ptrTo(false)})
	wantErr(t, err, models.KindNotFound, "hook not found")
	_, err = app.Accounts().UpdateHook(ctx, a, models.HookPatch{ID: hooks[1].ID, HookType: ptrTo("article"), HookTemplateSlug: ptrTo("copy")})
	wantErr(t, err, models.KindConflict, "already exists")
	err = app.Accounts().DeleteHook(ctx, b, hooks[0].ID)
	wantErr(t, err, models.KindNotFound, "hook not found")
	wantErr(t, app.Accounts().DeleteHook(ctx, a, hooks[0].ID), 0, "")
	wantErr(t, app.Accounts().DeleteHook(ctx, a, hooks[0].ID), models.KindNotFound, "hook not found")
}
