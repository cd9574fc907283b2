package models_test

import (
	"slices"
	"testing"

	"studio/models"
)

func TestParseArticleIsLenient(t *testing.T) {
	cases := []struct {
		name, format, answer string
		title, body          string
		tags                 []string // nil: no hashtags field
	}{
		{"plain", "wechat", `{"title":"T","body":"B"}`, "T", "B", nil},
		{"fenced with prose", "xiaohongshu", "Sure! Here it is:\n```json\n{\"title\": \"标题\", \"body\": \"正文\", \"hashtags\": [\"#露营\", \"好物\", \"露营\"]}\n```\nEnjoy.",
			"标题", "正文", []string{"露营", "好物"}},
		{"tags as one string", "xiaohongshu", `{"title":"T","body":"B","hashtags":"#a #b, c"}`, "T", "B", []string{"a", "b", "c"}},
		{"no tags", "xiaohongshu", `{"title":"T","body":"B"}`, "T", "B", []string{}},
		{"aliases and paragraphs", "script", `{"Headline":"T","content":["one","two"]}`, "T", "one\n\ntwo", nil},
		{"tags dropped for other formats", "detail", `{"title":"T","body":"B","hashtags":["x"]}`, "T", "B", nil},
		{"a brace in prose first", "wechat", `Use {braces} like this: {"title":"T","body":"B"}`, "T", "B", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := models.ParseArticle(c.format, c.answer)
			if err != nil {
				t.Fatal(err)
			}
			if a.Format != c.format || a.Title != c.title || a.Body != c.body {
				t.Fatalf("article = %+v", a)
			}
			switch {
			case c.tags == nil && a.Hashtags != nil:
				t.Fatalf("hashtags = %v, want none", *a.Hashtags)
			case c.tags != nil && (a.Hashtags == nil || !slices.Equal(*a.Hashtags, c.tags)):
				t.Fatalf("hashtags = %v, want %v", a.Hashtags, c.tags)
			}
		})
	}
	for _, bad := range []string{"", "no json here", `{"title":"T"}`, `{"body":"B"}`, `{"title":"  ","body":"B"}`, `{"title":1,"body":"B"}`, `{"title":"T","body":`} {
		if _, err := models.ParseArticle("wechat", bad); err == nil {
			t.Errorf("ParseArticle(%q) accepted an unusable answer", bad)
		}
	}
}
