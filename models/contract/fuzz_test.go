package contract

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// placeholderRE is the reference definition of a placeholder that the scanner must agree with.
var placeholderRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func FuzzSubstitute(f *testing.F) {
	f.Add("poster of {title}", "Spring")
	f.Add("{a}{b}{a}", "{b}")
	f.Add(`{"a":1} {{x}} { y } {}`, "")
	f.Add("{title}/{title_2}/{标题}", "  ")
	f.Fuzz(func(t *testing.T, tpl, value string) {
		keys := Placeholders(tpl)
		var want []string
		for _, m := range placeholderRE.FindAllStringSubmatch(tpl, -1) {
			if !slices.Contains(want, m[1]) {
				want = append(want, m[1])
			}
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("Placeholders(%q) = %q, reference %q", tpl, keys, want)
		}
		fields := make([]Field, len(keys))
		input := make(map[string]any, len(keys))
		self := make(map[string]any, len(keys))
		for i, k := range keys {
			fields[i] = Field{Key: k, Label: k}
			input[k] = value
			self[k] = "{" + k + "}"
		}
		if err := ValidateForm(tpl, fields); err != nil {
			t.Fatalf("ValidateForm(%q) = %v, want nil for declared placeholders", tpl, err)
		}

		// Substituting each placeholder with its own text gives the template back.
		if got, err := Substitute(tpl, fields, self); err != nil || got != tpl {
			t.Fatalf("Substitute(%q, self) = %q, %v; want the template", tpl, got, err)
		}

		got, err := Substitute(tpl, fields, input)
		if len(keys) > 0 && strings.TrimSpace(value) == "" {
			var missing *MissingFieldsError
			if !errors.As(err, &missing) || !slices.Equal(missing.Keys, keys) {
				t.Fatalf("Substitute(%q) with blank values = %v, want missing %q", tpl, err, keys)
			}
			return
		}
		if err != nil {
			t.Fatalf("Substitute(%q, %q) = %v", tpl, value, err)
		}
		ref := placeholderRE.ReplaceAllLiteralString(tpl, value)
		if len(keys) == 0 {
			ref = tpl
		}
		if got != ref {
			t.Fatalf("Substitute(%q, %q) = %q, reference %q", tpl, value, got, ref)
		}
	})
}

func FuzzValidateImageConfig(f *testing.F) {
	f.Add([]byte(`{"model":"auto","prompt_template":"{title}","fields":[{"key":"title","label":"Title"}]}`))
	f.Add([]byte(`{"skill_spec_md":"# Spec","default_reference_images":["https://a.example/x.png"],"quality":"low"}`))
	f.Add([]byte(`{"prompt_template":"{s}","fields":[{"key":"s","label":"S","type":"select","options":["a|A",{"value":"b"},3,null]}]}`))
	f.Add([]byte(`{"fields":[{"options":[{}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c ImageConfig
		if json.Unmarshal(data, &c) != nil {
			return
		}
		if c.Validate() != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal of a valid config: %v", err)
		}
		var again ImageConfig
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("Unmarshal of %s: %v", out, err)
		}
		if err := again.Validate(); err != nil {
			t.Fatalf("config %s is valid but its round trip %s is not: %v", data, out, err)
		}
		if out2, _ := json.Marshal(again); string(out2) != string(out) {
			t.Fatalf("round trip not stable:\n%s\n%s", out, out2)
		}
		// A valid form config substitutes once every field has an acceptable value.
		input := make(map[string]any, len(c.Fields))
		for _, fd := range c.Fields {
			input[fd.Key] = "x"
			if fd.EffectiveType() == FieldSelect {
				input[fd.Key] = fd.Options[0].Value()
			}
		}
		if c.PromptTemplate != "" {
			if _, err := Substitute(c.PromptTemplate, c.Fields, input); err != nil {
				t.Fatalf("Substitute on valid config %s: %v", data, err)
			}
		}
	})
}
