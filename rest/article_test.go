package rest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"studio/jobs/upstream/fakeupstream"
)

// tplCopy returns a POST /api/templates body of a form-mode copy template of a format with one
// required field, product, and one optional field, tone.
func tplCopy(slug, format string) map[string]any {
	return map[string]any{"type": "article", "slug": slug, "zh_name": "文案 " + slug, "generation_configs": []any{map[string]any{
		"format": format, "prompt_template": "为{product}写一篇文案，语气{tone}",
		"fields": []any{map[string]any{"key": "product", "label": "产品"}, map[string]any{"key": "tone", "label": "语气", "required": false}},
	}}}
}

func TestArticleReturnsTheFieldsOfEachFormat(t *testing.T) {
	fake, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 3)
	for _, format := range []string{"xiaohongshu", "wechat", "detail", "script"} {
		t.Run(format, func(t *testing.T) {
			e.tplCreate("/api/templates", key, tplCopy("copy-"+format, format))
			r := e.call("POST", "/api/article", key, map[string]any{"template_slug": "copy-" + format,
				"input": map[string]any{"product": "保温杯"}}).expect(t, 200)
			if r.JSON["ok"] != true || r.str("format") != format || r.str("title") != "fake title" || r.str("body") != "fake body" {
				t.Fatalf("article = %s", r.Body)
			}
			tags, has := r.JSON["hashtags"]
			if format == "xiaohongshu" {
				if list, _ := tags.([]any); len(list) != 1 || list[0] != "fake" {
					t.Fatalf("hashtags = %v, want [fake]", tags)
				}
			} else if has {
				t.Fatalf("%s returned hashtags: %s", format, r.Body)
			}
			leaks(t, r.Body, "为", "保温杯") // neither the recipe nor the upstream is shown
			var sent struct {
				Messages []struct {
					Role, Content string
				} `json:"messages"`
				ResponseFormat map[string]any `json:"response_format"`
			}
			_ = json.Unmarshal(fake.LastRequest("/v1/chat/completions").Body, &sent)
			if len(sent.Messages) != 2 || sent.Messages[1].Content != "为保温杯写一篇文案，语气" || sent.ResponseFormat["type"] != "json_object" {
				t.Fatalf("upstream request = %+v", sent)
			}
		})
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 3 {
		t.Fatalf("credits = %v after copy, want 3 (copy is free)", b.num("credits"))
	}
	if today := e.usageToday(key); today["chat"] != 4.0 {
		t.Fatalf("usage today = %v, want 4 copy calls in the chat column", today)
	}
}

func TestArticleValidatesItsInput(t *testing.T) {
	fake, opt := fakeUpstreams(t)
	e := newEnv(t, opt)
	_, key := e.tenant("Acme", 0)
	e.tplCreate("/api/templates", key, tplCopy("form-copy", "wechat"))
	e.tplCreate("/api/templates", key, tplSpec("article", "spec-copy", "# Write a short note"))
	e.tplCreate("/api/templates", key, tplImage("poster", "a poster of {title}"))
	cases := []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"missing required field", map[string]any{"template_slug": "form-copy", "input": map[string]any{"tone": "warm"}}, 400, "missing required field: product"},
		{"no input for a form template", map[string]any{"template_slug": "form-copy"}, 400, "product"},
		{"a string for a form template", map[string]any{"template_slug": "form-copy", "input": "a cup"}, 400, "object"},
		{"an object for a spec template", map[string]any{"template_slug": "spec-copy", "input": map[string]any{"product": "cup"}}, 400, "description"},
		{"a blank description", map[string]any{"template_slug": "spec-copy", "input": "  "}, 400, "description"},
		{"no template", map[string]any{"input": "x"}, 400, "template_slug"},
		{"unknown template", map[string]any{"template_slug": "nope", "input": "x"}, 404, "template"},
		{"an image template", map[string]any{"template_slug": "poster", "input": map[string]any{"title": "x"}}, 404, "template"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/article", key, c.body)
			if r.Status != c.status || !strings.Contains(r.str("error"), c.msg) {
				t.Fatalf("got %d %s, want %d containing %q", r.Status, r.Body, c.status, c.msg)
			}
		})
	}
	if n := fake.Count("/v1/chat/completions"); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
	r := e.call("POST", "/api/article", key, map[string]any{"template_slug": "spec-copy", "input": "a thermos for winter hikes"}).expect(t, 200)
	if r.str("format") != "xiaohongshu" || r.JSON["hashtags"] == nil {
		t.Fatalf("spec copy = %s", r.Body)
	}
	e.call("POST", "/api/article", e.adminKey, map[string]any{"template_slug": "spec-copy", "input": "x"}).expect(t, 403)
}

// badCopyServer answers every chat completion with content that is not a copy object.
func badCopyServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Sorry, I cannot write that as JSON."}}]}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func TestArticleFallsBackOnAnUnusableAnswer(t *testing.T) {
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	bad := badCopyServer(t)
	e := newEnv(t, withUpstreams(chatChannel("chat-bad", bad), chatChannel("chat-good", fake.ChannelURL("chat-good"))))
	_, key := e.tenant("Acme", 0)
	e.tplCreate("/api/templates", key, tplCopy("copy", "xiaohongshu"))
	for range 6 { // whichever upstream routing draws first, the answer comes from the good one
		r := e.call("POST", "/api/article", key, map[string]any{"template_slug": "copy", "input": map[string]any{"product": "cup"}}).expect(t, 200)
		if r.str("title") != "fake title" {
			t.Fatalf("article = %s", r.Body)
		}
	}
	e2 := newEnv(t, withUpstreams(chatChannel("chat-bad", bad)))
	_, key2 := e2.tenant("Acme", 0)
	e2.tplCreate("/api/templates", key2, tplCopy("copy", "xiaohongshu"))
	r := e2.call("POST", "/api/article", key2, map[string]any{"template_slug": "copy", "input": map[string]any{"product": "cup"}}).expect(t, 503)
	leaks(t, r.Body, "chat-bad", "Sorry")
}

func TestBuiltinCopyHasARealTitle(t *testing.T) {
	e := newEnv(t) // the built-in upstreams
	_, key := e.tenant("Acme", 10)
	for _, c := range []struct {
		name, template, product, subject string
		instruction                      []string
	}{
		{"chinese", "为{product}写一篇小红书笔记，突出316不锈钢内胆和12小时保温，适合上班族", "我们的新款保温杯", "新款保温杯", []string{"写一篇", "笔记", "突出"}},
		{"english", "Write a xiaohongshu note about {product} that keeps drinks cold for 24 hours", "our new insulated steel bottle", "Insulated Steel Bottle", []string{"Write", "note about", "keeps"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tpl := tplCopy("copy-"+c.name, "xiaohongshu")
			tpl["generation_configs"].([]any)[0].(map[string]any)["prompt_template"] = c.template
			e.tplCreate("/api/templates", key, tpl)
			r := e.call("POST", "/api/article", key, map[string]any{"template_slug": "copy-" + c.name,
				"input": map[string]any{"product": c.product}}).expect(t, 200)
			title := r.str("title")
			prompt := strings.ReplaceAll(c.template, "{product}", c.product)
			if title == "" || strings.HasPrefix(prompt, title) || !strings.Contains(title, c.subject) {
				t.Fatalf("title = %q, want a headline about %q, not the prompt cut short (%q)", title, c.subject, prompt)
			}
			for _, w := range c.instruction {
				if strings.Contains(title, w) {
					t.Errorf("title %q repeats the request's words %q", title, w)
				}
			}
			if r.str("body") == "" {
				t.Errorf("empty body: %s", r.Body)
			}
		})
	}
}

// TestBuiltinCopyHashtagsAreTags: the built-in copy writer tags its copy with the subject and whole
// words, never with pieces of the request ("写一", "篇小", "红书" cut from "写一篇小红书笔记").
func TestBuiltinCopyHashtagsAreTags(t *testing.T) {
	e := newEnv(t) // the built-in upstreams
	_, key := e.tenant("Acme", 10)
	for _, c := range []struct {
		name, template, product, subjectTag string
		notTags                             []string
	}{
		{"chinese", "为{product}写一篇小红书笔记", "Lu Yu Tea", "LuYuTea", []string{"写一", "篇小", "红书", "笔记"}},
		{"english", "Write a xiaohongshu note about {product} that keeps drinks cold", "our insulated bottle", "insulatedbottle", []string{"write", "xiaohongshu", "note", "keeps", "drinks"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tpl := tplCopy("tags-"+c.name, "xiaohongshu")
			tpl["generation_configs"].([]any)[0].(map[string]any)["prompt_template"] = c.template
			e.tplCreate("/api/templates", key, tpl)
			r := e.call("POST", "/api/article", key, map[string]any{"template_slug": "tags-" + c.name,
				"input": map[string]any{"product": c.product}}).expect(t, 200)
			tags, _ := r.JSON["hashtags"].([]any)
			if len(tags) == 0 || tags[0] != c.subjectTag {
				t.Fatalf("hashtags = %v, want the subject %q first", tags, c.subjectTag)
			}
			for _, tag := range tags {
				if slices.Contains(c.notTags, tag.(string)) {
					t.Errorf("hashtag %q is a piece of the request: %v", tag, tags)
				}
			}
			if body := r.str("body"); strings.Contains(body, "关于「") && !strings.Contains(body, "」的") {
				t.Errorf("body %q leaves its sentence unfinished", body)
			}
		})
	}
}
