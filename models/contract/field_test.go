package contract

import (
	"encoding/json"
	"regexp"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestFieldDefaults(t *testing.T) {
	var f Field
	if err := json.Unmarshal([]byte(`{"key":"title","label":"Title"}`), &f); err != nil {
		t.Fatal(err)
	}
	if !f.IsRequired() {
		t.Errorf("IsRequired() = false, want true when required is absent")
	}
	if got := f.EffectiveType(); got != FieldText {
		t.Errorf("EffectiveType() = %q, want %q", got, FieldText)
	}
	f.Required = ptr(false)
	if f.IsRequired() {
		t.Errorf("IsRequired() = true, want false when required is false")
	}
	out, _ := json.Marshal(Field{Key: "a", Label: "A"})
	if got, want := string(out), `{"key":"a","label":"A"}`; got != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
}

func TestOptionForms(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		value     string
		label     string
		valid     bool
		marshaled string
	}{
		{"pair string", `"m|Medium"`, "m", "Medium", true, `"m|Medium"`},
		{"plain string", `"Large"`, "Large", "Large", true, `"Large"`},
		{"pipe in label", `"a|b|c"`, "a", "b|c", true, `"a|b|c"`},
		{"empty label falls back", `"v|"`, "v", "v", true, `"v|"`},
		{"object", `{"label":"Small","value":"s"}`, "s", "Small", true, `{"label":"Small","value":"s"}`},
		{"object keeps extra members and spacing is compacted", `{ "value" : "s", "note": 1 }`, "s", "s", true, `{"value":"s","note":1}`},
		{"object null label", `{"value":"s","label":null}`, "s", "s", true, `{"value":"s","label":null}`},
		{"object number value", `{"label":"One","value":1}`, "", "", false, `{"label":"One","value":1}`},
		{"object missing value", `{"label":"One"}`, "", "One", false, `{"label":"One"}`},
		{"number", `3`, "", "", false, `3`},
		{"null", `null`, "", "", false, `null`},
		{"unicode", `"红|Red 红色"`, "红", "Red 红色", true, `"红|Red 红色"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if err := json.Unmarshal([]byte("["+tt.in+"]"), &opts); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			o := opts[0]
			if tt.valid && (o.Value() != tt.value || o.Label() != tt.label) {
				t.Errorf("Value(), Label() = %q, %q; want %q, %q", o.Value(), o.Label(), tt.value, tt.label)
			}
			if o.ok != tt.valid {
				t.Errorf("valid = %v, want %v", o.ok, tt.valid)
			}
			out, err := json.Marshal(opts)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if got, want := string(out), "["+tt.marshaled+"]"; got != want {
				t.Errorf("Marshal = %s, want %s", got, want)
			}
		})
	}
}

func TestOptionConstructors(t *testing.T) {
	o := NewOption("s", "Small")
	if o.Value() != "s" || o.Label() != "Small" {
		t.Errorf("NewOption: got %q/%q, want s/Small", o.Value(), o.Label())
	}
	if out, _ := json.Marshal(o); string(out) != `{"label":"Small","value":"s"}` {
		t.Errorf("NewOption marshal = %s", out)
	}
	o = OptionFromString("l|Large")
	if o.Value() != "l" || o.Label() != "Large" {
		t.Errorf("OptionFromString: got %q/%q, want l/Large", o.Value(), o.Label())
	}
	if out, _ := json.Marshal(Option{}); string(out) != `""` {
		t.Errorf("zero Option marshal = %s, want \"\"", out)
	}
}

func TestIsKeyMatchesKeyPattern(t *testing.T) {
	re := regexp.MustCompile(KeyPattern)
	for _, s := range []string{"", "a", "_", "A1", "1a", "a-b", "a b", "title_2", "标题", "é", "a\n", "__x__", "x{"} {
		if got, want := isKey(s), re.MatchString(s); got != want {
			t.Errorf("isKey(%q) = %v, want %v (KeyPattern)", s, got, want)
		}
	}
}

func TestValidateFields(t *testing.T) {
	sel := func(opts ...Option) Field { return Field{Key: "size", Label: "Size", Type: FieldSelect, Options: opts} }
	tests := []struct {
		name    string
		fields  []Field
		wantErr string
	}{
		{"none", nil, ""},
		{"text and textarea", []Field{{Key: "a", Label: "A"}, {Key: "b", Label: "B", Type: FieldTextarea}}, ""},
		{"select string options", []Field{sel(OptionFromString("s|Small"), OptionFromString("m"))}, ""},
		{"select object options", []Field{sel(NewOption("s", "Small"))}, ""},
		{"empty key", []Field{{Label: "A"}}, "fields[0].key: a key is required"},
		{"unicode key", []Field{{Key: "标题", Label: "A"}}, `fields[0].key: "标题" is not a valid key; use ASCII letters, digits and _, not starting with a digit (^[A-Za-z_][A-Za-z0-9_]*$)`},
		{"digit first", []Field{{Key: "1a", Label: "A"}}, `fields[0].key: "1a" is not a valid key; use ASCII letters, digits and _, not starting with a digit (^[A-Za-z_][A-Za-z0-9_]*$)`},
		{"space in key", []Field{{Key: "a b", Label: "A"}}, `fields[0].key: "a b" is not a valid key; use ASCII letters, digits and _, not starting with a digit (^[A-Za-z_][A-Za-z0-9_]*$)`},
		{"duplicate key", []Field{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, {Key: "a", Label: "C"}}, `fields[2].key: duplicate key "a" (also fields[0])`},
		{"missing label", []Field{{Key: "a", Label: "A"}, {Key: "b"}}, "fields[1].label: a label is required"},
		{"blank label", []Field{{Key: "a", Label: "  "}}, "fields[0].label: a label is required"},
		{"unknown type", []Field{{Key: "a", Label: "A", Type: "number"}}, `fields[0].type: unknown type "number"; use text, textarea or select`},
		{"type is case-sensitive", []Field{{Key: "a", Label: "A", Type: "Text"}}, `fields[0].type: unknown type "Text"; use text, textarea or select`},
		{"select without options", []Field{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, sel()}, "fields[2].options: a select field needs at least one option"},
		{"empty string option", []Field{sel(OptionFromString("s"), OptionFromString(""))}, "fields[0].options[1]: an option needs a non-empty value"},
		{"empty value with label", []Field{sel(OptionFromString("|Small"))}, "fields[0].options[0]: an option needs a non-empty value"},
		{"blank object value", []Field{sel(NewOption(" ", "Small"))}, "fields[0].options[0]: an option needs a non-empty value"},
		{"duplicate option value", []Field{sel(OptionFromString("s|Small"), NewOption("s", "Again"))}, `fields[0].options[1]: duplicate option value "s" (also fields[0].options[0])`},
		{"options on text field", []Field{{Key: "a", Label: "A", Options: []Option{OptionFromString("x")}}}, `fields[0].options: options are only used by select fields; set type to "select"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, ValidateFields(tt.fields), tt.wantErr)
		})
	}
}

func TestValidateFieldsInvalidOptionJSON(t *testing.T) {
	var fields []Field
	if err := json.Unmarshal([]byte(`[{"key":"n","label":"N","type":"select","options":["1",{"label":"Two","value":2}]}]`), &fields); err != nil {
		t.Fatal(err)
	}
	checkErr(t, ValidateFields(fields), `fields[0].options[1]: an option must be a string "value|label" or an object {"label", "value"} with string members`)
}

func TestValidateSkillFields(t *testing.T) {
	checkErr(t, ValidateSkillFields([]Field{{Key: "a", Label: "A", Type: FieldTextarea}}), "")
	checkErr(t, ValidateSkillFields([]Field{{Key: "a", Label: "A", Type: FieldSelect, Options: []Option{OptionFromString("x")}}}),
		`fields[0].type: a skill field must be text or textarea, not "select"`)
	checkErr(t, ValidateSkillFields([]Field{{Key: "", Label: "A"}}), "fields[0].key: a key is required")
}

// checkErr fails t unless err's message equals want ("" = no error) and err is a *ValidationError.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("got error %q, want none", err)
		}
		return
	}
	if err == nil {
		t.Errorf("got no error, want %q", want)
		return
	}
	if err.Error() != want {
		t.Errorf("got error  %q\nwant error %q", err, want)
	}
	if _, ok := err.(*ValidationError); !ok {
		t.Errorf("got error type %T, want *ValidationError", err)
	}
}
