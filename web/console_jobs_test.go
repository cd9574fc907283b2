package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"studio/models"
)

// The jobs page generates the way the API does: an image from a template (its fields as inputs), a
// video, and copy from a copy template, through the same core calls.

func TestJobsPageGeneratesFromATemplateAVideoAndCopy(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("Acme", 100)
	tplID := e.platformTemplate("人像", "portrait")
	b := e.browser()
	b.signIn(key)
	csrf := b.csrf()

	// Image from a template: the choice lists it, choosing it renders its field.
	pick := b.get("/console/jobs?make=template")
	if pick.Status != 200 || !strings.Contains(pick.Body, `<option value="`+tplID+`"`) {
		t.Fatalf("template choice = %d: %s", pick.Status, excerpt(pick.Body))
	}
	form := b.get("/console/jobs?make=template&template=" + tplID)
	if !strings.Contains(form.Body, `name="in_subject"`) || !strings.Contains(form.Body, "主体") || !strings.Contains(form.Body, `name="template_id" value="`+tplID+`"`) {
		t.Fatalf("template form without its field: %s", excerpt(form.Body))
	}
	if p := b.get("/console/jobs?make=template&template=not-a-template"); p.Status != http.StatusNotFound {
		t.Fatalf("unknown template = %d", p.Status)
	}
	post := func(v url.Values) *page {
		v.Set("csrf", csrf)
		return b.post("/console/jobs", v)
	}
	if p := post(url.Values{"make": {"template"}, "template_id": {tplID}}); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "subject") {
		t.Fatalf("missing required field = %d: %s", p.Status, excerpt(p.Body))
	}
	if page, _ := e.app.Jobs().Jobs(context.Background(), &models.Identity{Kind: models.IdentityTenant, TenantID: tenantID}, "", "", 20); len(page.Jobs) != 0 {
		t.Fatalf("a refused form created %d jobs", len(page.Jobs))
	}
	res := post(url.Values{"make": {"template"}, "template_id": {tplID}, "in_subject": {"a red fox"}})
	if res.Status != http.StatusSeeOther || res.Location != "/console/jobs?notice=job-submitted" {
		t.Fatalf("template submit = %d %q: %s", res.Status, res.Location, excerpt(res.Body))
	}
	waitFor(t, "the template job", 10*time.Second, func() bool {
		return strings.Contains(b.get("/console/jobs").Body, `class="thumb"`)
	})
	if body := string(e.fake.LastRequest("/v1/images/generations").Body); !strings.Contains(body, "a portrait of a red fox") {
		t.Fatalf("the upstream got %s, want the template's prompt with the field substituted", body)
	}

	// Times carry their time zone.
	jobsPage := b.get("/console/jobs")
	if !regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d UTC\+08:00`).MatchString(jobsPage.Body) || !strings.Contains(jobsPage.Body, `<time datetime="`) {
		t.Fatalf("job times without a time zone: %s", excerpt(jobsPage.Body))
	}

	// A video.
	if p := post(url.Values{"make": {"video"}, "prompt": {"a boat"}, "duration": {"five"}}); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "duration") {
		t.Fatalf("bad duration = %d: %s", p.Status, excerpt(p.Body))
	}
	res = post(url.Values{"make": {"video"}, "prompt": {"a boat at dawn"}, "duration": {"5"}, "model": {""}})
	if res.Status != http.StatusSeeOther || !strings.HasPrefix(res.Location, "/console/jobs?make=video") {
		t.Fatalf("video submit = %d %q: %s", res.Status, res.Location, excerpt(res.Body))
	}
	status, list := e.api("GET", "/api/videos", key, nil)
	if status != 200 || list["total"].(float64) != 1 {
		t.Fatalf("videos over the API = %d %v", status, list)
	}
	waitFor(t, "the video", 15*time.Second, func() bool {
		return strings.Contains(b.get("/console/jobs?make=video").Body, "Open the video")
	})
	if body := string(e.fake.LastRequest("/v1/videos").Body); !strings.Contains(body, "a boat at dawn") {
		t.Fatalf("the video upstream got %s", body)
	}

	// A video from a video template of the tenant: its field is the input, its tier and length apply.
	tenant := &models.Identity{Kind: models.IdentityTenant, TenantID: tenantID}
	vt, err := e.app.Templates().CreateVideoTemplate(context.Background(), tenant, models.VideoTemplateInput{Slug: "promo-clip", ZhName: "宣传短片",
		SampleCoverImage: "https://cdn.example.com/c.jpg", SampleVideoURL: "https://cdn.example.com/c.mp4", Category: "promo",
		GenerationConfigs: json.RawMessage(`[{"model":"vidA-2-0-fast-260801","duration":6,"prompt_template":"A clip about {title}","fields":[{"key":"title","label":"标题"}]}]`)})
	if err != nil {
		t.Fatal(err)
	}
	if p := b.get("/console/jobs?make=video&template=" + vt.ID); !strings.Contains(p.Body, `name="in_title"`) || strings.Contains(p.Body, `id="video-prompt"`) {
		t.Fatalf("video template form: %s", excerpt(p.Body))
	}
	res = post(url.Values{"make": {"video"}, "template_id": {vt.ID}, "in_title": {"green tea"}})
	if res.Status != http.StatusSeeOther {
		t.Fatalf("video template submit = %d: %s", res.Status, excerpt(res.Body))
	}
	waitFor(t, "the template video", 15*time.Second, func() bool {
		return strings.Count(b.get("/console/jobs?make=video").Body, "Open the video") == 2
	})
	var sent map[string]any
	_ = json.Unmarshal(e.fake.LastRequest("/v1/videos").Body, &sent)
	if sent["prompt"] != "A clip about green tea" || sent["model"] != "vidA-2-0-fast-260801" {
		t.Fatalf("the video upstream got %v", sent)
	}

	// Copy from a copy template of the tenant.
	cfg := `[{"format":"xiaohongshu","prompt_template":"为{product}写一篇文案","fields":[{"key":"product","label":"产品"}]}]`
	cp, err := e.app.Templates().CreateTemplate(context.Background(), tenant, models.TemplateInput{Type: models.TemplateArticle, Slug: "note",
		ZhName: "小红书笔记", GenerationConfigs: json.RawMessage(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	if p := b.get("/console/jobs?make=copy&template=" + cp.ID); !strings.Contains(p.Body, `name="in_product"`) || !strings.Contains(p.Body, "Write copy") {
		t.Fatalf("copy form: %s", excerpt(p.Body))
	}
	art := post(url.Values{"make": {"copy"}, "template_id": {cp.ID}, "in_product": {"保温杯"}})
	if art.Status != 200 || !strings.Contains(art.Body, `id="article-title">fake title<`) || !strings.Contains(art.Body, "fake body") ||
		!strings.Contains(art.Body, "#fake") {
		t.Fatalf("copy = %d: %s", art.Status, excerpt(art.Body))
	}
	if body := string(e.fake.LastRequest("/v1/chat/completions").Body); !strings.Contains(body, "为保温杯写一篇文案") {
		t.Fatalf("the chat upstream got %s", body)
	}
}

// videoFormValues are what a browser submits from the video form as rendered: every input with its
// value, the selected option of every select, and the given text in each textarea.
func videoFormValues(t *testing.T, body string, text map[string]string) url.Values {
	t.Helper()
	start := strings.Index(body, `id="video-form"`)
	end := strings.Index(body[max(start, 0):], "</form>")
	if start < 0 || end < 0 {
		t.Fatalf("no video form: %s", excerpt(body))
	}
	form := body[start : start+end]
	v := url.Values{}
	for _, in := range regexp.MustCompile(`<input[^>]*>`).FindAllString(form, -1) {
		name := regexp.MustCompile(`name="([^"]*)"`).FindStringSubmatch(in)
		if name == nil {
			continue
		}
		value := ""
		if m := regexp.MustCompile(`value="([^"]*)"`).FindStringSubmatch(in); m != nil {
			value = m[1]
		}
		if strings.Contains(in, " required") && value == "" {
			t.Fatalf("the form asks for %s with no value: %s", name[1], in)
		}
		v.Set(name[1], value)
	}
	for _, sel := range regexp.MustCompile(`(?s)<select[^>]*name="([^"]*)"[^>]*>(.*?)</select>`).FindAllStringSubmatch(form, -1) {
		opts := regexp.MustCompile(`<option value="([^"]*)"( selected)?`).FindAllStringSubmatch(sel[2], -1)
		if len(opts) == 0 {
			continue
		}
		v.Set(sel[1], opts[0][1])
		for _, o := range opts {
			if o[2] != "" {
				v.Set(sel[1], o[1])
			}
		}
	}
	for k, s := range text {
		v.Set(k, s)
	}
	return v
}

// TestVideoFormAsRenderedSubmits: a tenant who types only a prompt into the video form and submits it
// gets a video: the form offers a length every tier takes, instead of an empty field the service refuses.
func TestVideoFormAsRenderedSubmits(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 100)
	b := e.browser()
	b.signIn(key)
	p := b.get("/console/jobs?make=video")
	if p.Status != 200 {
		t.Fatalf("video form = %d", p.Status)
	}
	v := videoFormValues(t, p.Body, map[string]string{"prompt": "a boat at dawn"})
	res := b.post("/console/jobs", v)
	if res.Status != http.StatusSeeOther || !strings.HasPrefix(res.Location, "/console/jobs?make=video") {
		t.Fatalf("the video form as rendered (%v) = %d %q: %s", v, res.Status, res.Location, excerpt(res.Body))
	}
	status, list := e.api("GET", "/api/videos", key, nil)
	if status != 200 || list["total"].(float64) != 1 {
		t.Fatalf("videos over the API = %d %v", status, list)
	}
}
