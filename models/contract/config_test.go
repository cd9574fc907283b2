package contract

import (
	"encoding/json"
	"testing"
)

func TestImageConfigValidate(t *testing.T) {
	form := ImageConfig{PromptTemplate: "poster {title}", Fields: []Field{{Key: "title", Label: "Title"}}}
	with := func(edit func(*ImageConfig)) ImageConfig {
		c := form
		edit(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     ImageConfig
		wantErr string
	}{
		{"form", form, ""},
		{"spec", ImageConfig{SkillSpecMD: "# Spec"}, ""},
		{"auto model", with(func(c *ImageConfig) { c.Model = "auto" }), ""},
		{"family model", with(func(c *ImageConfig) { c.Model = "gen2" }), ""},
		{"model with space", with(func(c *ImageConfig) { c.Model = "gen 2" }), `model: "gen 2" is not a model name; use auto, a model family or a channel name`},
		{"all qualities", with(func(c *ImageConfig) { c.Quality = "medium" }), ""},
		{"unknown quality", with(func(c *ImageConfig) { c.Quality = "best" }), `quality: unknown quality "best"; use low, medium or high`},
		{"reference images", with(func(c *ImageConfig) {
			c.RefRequired = true
			c.DefaultReferenceImages = []string{"https://cdn.example.com/a.png", "http://127.0.0.1:8080/media/b.jpg"}
		}), ""},
		{"reference image not http", with(func(c *ImageConfig) {
			c.DefaultReferenceImages = []string{"https://cdn.example.com/a.png", "ftp://x/y.png"}
		}), `default_reference_images[1]: "ftp://x/y.png" is not an http or https URL`},
		{"reference image relative", with(func(c *ImageConfig) { c.DefaultReferenceImages = []string{"/media/a.png"} }), `default_reference_images[0]: "/media/a.png" is not an http or https URL`},
		{"reference image empty", with(func(c *ImageConfig) { c.DefaultReferenceImages = []string{""} }), `default_reference_images[0]: "" is not an http or https URL`},
		{"reference image no host", with(func(c *ImageConfig) { c.DefaultReferenceImages = []string{"https:///a.png"} }), `default_reference_images[0]: "https:///a.png" is not an http or https URL`},
		{"both modes", with(func(c *ImageConfig) { c.SkillSpecMD = "# Spec" }), "skill_spec_md: a generation config takes either prompt_template (form mode) or skill_spec_md (spec mode), not both"},
		{"no mode", ImageConfig{Model: "auto"}, "prompt_template: a generation config needs prompt_template (form mode) or skill_spec_md (spec mode)"},
		{"placeholders without fields", ImageConfig{PromptTemplate: "poster {title}"}, "prompt_template: has placeholders {title} but no fields declare them"},
		{"select without options", ImageConfig{PromptTemplate: "{a}{b}{c}", Fields: []Field{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, {Key: "c", Label: "C", Type: "select"}}}, "fields[2].options: a select field needs at least one option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.cfg.Validate(), tt.wantErr)
		})
	}
}

func TestImageConfigJSON(t *testing.T) {
	in := `{"model":"auto","prompt_template":"{title} in {size}","fields":[{"key":"title","label":"Title"},{"key":"size","label":"Size","type":"select","required":false,"options":["s|Small",{"label":"Medium","value":"m"}]}],"ref_required":true,"default_reference_images":["https://cdn.example.com/a.png"],"quality":"high"}`
	var c ImageConfig
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip:\n got %s\nwant %s", out, in)
	}
}

func TestArticleConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     ArticleConfig
		wantErr string
	}{
		{"xiaohongshu form", ArticleConfig{Format: "xiaohongshu", PromptTemplate: "note about {subject}", Fields: []Field{{Key: "subject", Label: "Subject"}}}, ""},
		{"wechat spec", ArticleConfig{Format: "wechat", SkillSpecMD: "# Spec"}, ""},
		{"detail", ArticleConfig{Format: "detail", PromptTemplate: "copy"}, ""},
		{"script", ArticleConfig{Format: "script", PromptTemplate: "copy"}, ""},
		{"missing format", ArticleConfig{PromptTemplate: "copy"}, "format: a format is required; use xiaohongshu, wechat, detail or script"},
		{"unknown format", ArticleConfig{Format: "weibo", PromptTemplate: "copy"}, `format: unknown format "weibo"; use xiaohongshu, wechat, detail or script`},
		{"no mode", ArticleConfig{Format: "wechat"}, "prompt_template: a generation config needs prompt_template (form mode) or skill_spec_md (spec mode)"},
		{"undeclared placeholder", ArticleConfig{Format: "wechat", PromptTemplate: "{a} {b}", Fields: []Field{{Key: "a", Label: "A"}}}, "prompt_template: placeholder {b} is not declared in fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.cfg.Validate(), tt.wantErr)
		})
	}
}

func TestArticleFormats(t *testing.T) {
	want := map[string]string{"xiaohongshu": "title,body,hashtags", "wechat": "title,body", "detail": "title,body", "script": "title,body"}
	for name, fields := range want {
		f, ok := ArticleFormatByName(name)
		if !ok {
			t.Errorf("ArticleFormatByName(%q) not found", name)
			continue
		}
		got := ""
		for i, r := range f.ReturnedFields {
			if i > 0 {
				got += ","
			}
			got += r
		}
		if got != fields {
			t.Errorf("%s returns %s, want %s", name, got, fields)
		}
	}
	if _, ok := ArticleFormatByName("weibo"); ok {
		t.Errorf("ArticleFormatByName(weibo) ok = true, want false")
	}
}

func TestVideoConfigValidate(t *testing.T) {
	spec := "# Spec"
	tests := []struct {
		name    string
		cfg     VideoConfig
		wantErr string
	}{
		{"auto", VideoConfig{Model: "auto", Ratio: "16:9", Duration: 10, SkillSpecMD: spec}, ""},
		{"empty model means auto", VideoConfig{Duration: 20, SkillSpecMD: spec}, ""},
		{"locked fits", VideoConfig{Model: "vidA-2-5-pro-260801", Ratio: "9:16", Duration: 30, Resolution: "1080p", SkillSpecMD: spec}, ""},
		{"locked no duration", VideoConfig{Model: "vidB-H3", Resolution: "2K", SkillSpecMD: spec}, ""},
		{"form mode", VideoConfig{Model: "auto", Duration: 5, PromptTemplate: "a {subject} dancing", Fields: []Field{{Key: "subject", Label: "Subject"}}}, ""},
		{"unknown tier", VideoConfig{Model: "vidC", Duration: 5, SkillSpecMD: spec}, `model: unknown video model "vidC"; use auto or a tier code: vidA-2-0-pro-260801, vidA-2-0-fast-260801, vidA-2-0-mini-260801, vidA-2-5-pro-260801, vidB-H3`},
		{"locked duration too long", VideoConfig{Model: "vidA-2-0-fast-260801", Duration: 20, SkillSpecMD: spec}, "duration: 20 s is outside 4–15 s for tier vidA-2-0-fast-260801 (Tier A 2.0 Fast)"},
		{"locked duration too short", VideoConfig{Model: "vidA-2-5-pro-260801", Duration: 3, SkillSpecMD: spec}, "duration: 3 s is outside 4–30 s for tier vidA-2-5-pro-260801 (Tier A 2.5)"},
		{"locked resolution not offered", VideoConfig{Model: "vidB-H3", Duration: 5, Resolution: "1080p", SkillSpecMD: spec}, "resolution: 1080p is not offered by tier vidB-H3 (Tier B H3); it offers 768P or 2K"},
		{"locked resolution without duration", VideoConfig{Model: "vidA-2-0-pro-260801", Resolution: "720p", SkillSpecMD: spec}, "resolution: 720p is not offered by tier vidA-2-0-pro-260801 (Tier A 2.0); it offers 480p"},
		{"auto no tier fits", VideoConfig{Model: "auto", Duration: 20, Resolution: "2K", SkillSpecMD: spec}, "duration: no video tier offers 20 s at 2K; tiers with 2K allow 4–15 s"},
		{"auto too long", VideoConfig{Duration: 31, SkillSpecMD: spec}, "duration: no video tier offers 31 s; durations range 4–30 s"},
		{"unknown resolution", VideoConfig{Duration: 5, Resolution: "4k", SkillSpecMD: spec}, `resolution: unknown video resolution "4k"; use 480p, 720p, 768P, 1080p or 2K`},
		{"negative duration", VideoConfig{Duration: -1, SkillSpecMD: spec}, "duration: must be a positive number of seconds, or absent"},
		{"bad ratio", VideoConfig{Ratio: "16x9", SkillSpecMD: spec}, `ratio: "16x9" is not an aspect ratio W:H of positive whole numbers (for example 1:1, 3:4, 4:3, 9:16, 16:9)`},
		{"no mode", VideoConfig{Model: "auto", Duration: 5}, "prompt_template: a generation config needs prompt_template (form mode) or skill_spec_md (spec mode)"},
		{"required field unused", VideoConfig{Duration: 5, PromptTemplate: "a dance", Fields: []Field{{Key: "subject", Label: "Subject"}}}, `fields[0]: required field "subject" is not used in prompt_template; add {subject} or set required to false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.cfg.Validate(), tt.wantErr)
		})
	}
}
