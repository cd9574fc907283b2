package models_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"studio/models"
)

// FuzzDecodeRequests feeds arbitrary bytes to the JSON decoder of every request body shape the API
// accepts: it must never panic, and what it accepts must be a single JSON value.
func FuzzDecodeRequests(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"a fox","ratio":"3:4","quality":"high","reference_images":["https://x/y.png"]}`,
		`{"items":[{"prompt":"a"},{"skill_slug":"s","input":"one sentence"}]}`,
		`{"template_id":"` + models.NewID() + `","input":{"title":"t","count":3,"ok":true}}`,
		`{"action":"tenant-create","name":"Acme","credits":10,"markup":1.2}`,
		`{"action":"set-quota","account_id":"x","credits":-1}`,
		`{"prompt":`, `[1,2]`, `null`, `{"credits":1e400}`, `{"a":"\ud800"}`, `{} {}`, "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		targets := []any{&models.GenerateRequest{}, &models.VideoRequest{}, &models.TenantInput{}, &models.TemplateInput{},
			&models.ImageToTemplateRequest{}, &struct {
				Items []json.RawMessage `json:"items"`
			}{}, &map[string]any{}}
		for _, v := range targets {
			err := models.DecodeJSON(body, v)
			if err == nil && !json.Valid(body) {
				t.Fatalf("accepted invalid JSON %q into %T", body, v)
			}
			if err != nil && models.KindOf(err) != models.KindInvalid {
				t.Fatalf("decode error of kind %v for %q: %v", models.KindOf(err), body, err)
			}
		}
	})
}

// FuzzCheckJSONText: a JSON body that CheckJSONText passes decodes to text PostgreSQL can store (no NUL,
// valid UTF-8, keys included); a refusal is KindInvalid and names a field.
func FuzzCheckJSONText(f *testing.F) {
	for _, seed := range []string{`{"prompt":"a\u0000b"}`, "{\"a\":[1,{\"b\":\"\xff\"}]}", `{"a\u0000":1}`, `[[["\u0000"]]]`,
		`{"ok":"text","n":1e400}`, "\"\x00\"", `{"a":"\ud800"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := models.CheckJSONText(body)
		if err != nil {
			if models.KindOf(err) != models.KindInvalid || !strings.Contains(err.Error(), "field ") && !strings.HasPrefix(err.Error(), "the request ") {
				t.Fatalf("refusal %v for %q", err, body)
			}
			return
		}
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		if err := models.CheckArgs("", v); err != nil {
			t.Fatalf("passed %q, which decodes to unstorable text: %v", body, err)
		}
		if json.Valid(body) && !utf8.Valid(body) {
			t.Fatalf("passed %q, which is not UTF-8", body)
		}
	})
}
