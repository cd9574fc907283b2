package contract

import (
	"slices"
	"testing"
)

func TestWhitelist(t *testing.T) {
	var names []string
	for _, v := range Whitelist() {
		names = append(names, v.Name)
		if v.Meaning == "" {
			t.Errorf("variable %q has no meaning", v.Name)
		}
	}
	want := []string{"title", "subtitle", "subject", "date", "location", "watermark", "body", "cta", "style"}
	if !slices.Equal(names, want) {
		t.Errorf("Whitelist names = %q, want %q", names, want)
	}
	w := Whitelist()
	w[0].Name = "changed"
	if Whitelist()[0].Name != "title" {
		t.Errorf("Whitelist returned the package table, want a copy")
	}
}

func TestBaseNameAndIsWhitelisted(t *testing.T) {
	tests := []struct {
		key         string
		base        string
		whitelisted bool
	}{
		{"title", "title", true},
		{"subtitle_2", "subtitle", true},
		{"subtitle_17", "subtitle", true},
		{"cta_1", "cta", true},
		{"subtitle_", "subtitle_", false},
		{"subtitle_x", "subtitle_x", false},
		{"_2", "_2", false},
		{"price", "price", false},
		{"price_2", "price", false},
		{"Title", "Title", false},
		{"subtitle_2_3", "subtitle_2", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := BaseName(tt.key); got != tt.base {
				t.Errorf("BaseName(%q) = %q, want %q", tt.key, got, tt.base)
			}
			if got := IsWhitelisted(tt.key); got != tt.whitelisted {
				t.Errorf("IsWhitelisted(%q) = %v, want %v", tt.key, got, tt.whitelisted)
			}
		})
	}
}

func TestNormalizePlaceholders(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"brief example", []string{"title", "subtitle", "price", "subtitle", "subtitle_7", "style"}, []string{"title", "subtitle", "subtitle_2", "subtitle_3", "style"}},
		{"empty", nil, []string{}},
		{"all discarded", []string{"price", "logo", "标题", ""}, []string{}},
		{"numbered first use becomes plain", []string{"body_3", "body"}, []string{"body", "body_2"}},
		{"case, spaces and braces", []string{" Title ", "{subtitle}", "{ DATE }"}, []string{"title", "subtitle", "date"}},
		{"independent counters", []string{"title", "cta", "title", "cta", "title"}, []string{"title", "cta", "title_2", "cta_2", "title_3"}},
		{"double-numbered discarded", []string{"subtitle_2_3", "subtitle"}, []string{"subtitle"}},
		{"all nine", []string{"title", "subtitle", "subject", "date", "location", "watermark", "body", "cta", "style"}, []string{"title", "subtitle", "subject", "date", "location", "watermark", "body", "cta", "style"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NormalizePlaceholders(tt.in)
			if !slices.Equal(got, tt.want) {
				t.Errorf("NormalizePlaceholders(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, k := range got {
				if !isKey(k) || !IsWhitelisted(k) {
					t.Errorf("output key %q is not a whitelisted key", k)
				}
			}
		})
	}
}
