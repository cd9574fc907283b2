package contract

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestDocument(t *testing.T) {
	doc := Document()
	if doc.Fields.KeyPattern != KeyPattern || !doc.Fields.RequiredDefault || doc.Fields.DefaultType != FieldText {
		t.Errorf("field standard = %+v, want key pattern, required default true, default type text", doc.Fields)
	}
	if !slices.Equal(doc.Fields.Types, []string{"text", "textarea", "select"}) {
		t.Errorf("field types = %q", doc.Fields.Types)
	}
	if !slices.Equal(doc.Fields.SkillTypes, []string{"text", "textarea"}) {
		t.Errorf("skill field types = %q", doc.Fields.SkillTypes)
	}
	if !slices.Equal(doc.Whitelist, Whitelist()) {
		t.Errorf("whitelist differs from Whitelist()")
	}
	if len(doc.VideoTiers) != len(Tiers()) {
		t.Fatalf("video tiers = %d, want %d", len(doc.VideoTiers), len(Tiers()))
	}
	for i, tier := range Tiers() {
		got := doc.VideoTiers[i]
		if got.Code != tier.Code || len(got.CreditsPerSecond) != len(tier.Resolutions) {
			t.Errorf("video tier %d = %+v, want %+v with a cost per resolution", i, got, tier)
		}
	}
	if !slices.Equal(doc.Credits.ImagePerResolution, ImageResolutions()) || !slices.Equal(doc.Credits.VideoPerSecond, VideoResolutions()) {
		t.Errorf("credit tables differ from ImageResolutions/VideoResolutions")
	}
	if doc.Image.DefaultQuality != "high" || doc.Image.DefaultBackground != "opaque" || doc.Image.DefaultResolution != "1k" {
		t.Errorf("image defaults = %+v", doc.Image)
	}
	if len(doc.ArticleFormats) != 4 || doc.ArticleFormats[0].Format != "xiaohongshu" {
		t.Errorf("article formats = %+v", doc.ArticleFormats)
	}

	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	for _, want := range []string{
		`"key_pattern":"^[A-Za-z_][A-Za-z0-9_]*$"`,
		`"required_default":true`,
		`{"name":"cta","meaning":"call to action (button text)"}`,
		`{"code":"vidA-2-5-pro-260801","name":"Tier A 2.5","min_duration":4,"max_duration":30,"resolutions":["720p","1080p"],"credits_per_second":[{"resolution":"720p","credits":2},{"resolution":"1080p","credits":3}]}`,
		`{"format":"xiaohongshu","returned_fields":["title","body","hashtags"]}`,
		`"image_per_resolution":[{"resolution":"1k","credits":1},{"resolution":"2k","credits":2},{"resolution":"4k","credits":2}]`,
		`"reverse":1`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("document JSON lacks %s", want)
		}
	}
	// Changing the returned document must not change the contracts.
	doc.VideoTiers[0].Resolutions[0] = "changed"
	doc.ArticleFormats[0].ReturnedFields[0] = "changed"
	if Document().VideoTiers[0].Resolutions[0] != "480p" || Document().ArticleFormats[0].ReturnedFields[0] != "title" {
		t.Errorf("Document shares memory with the package tables")
	}
}
