package contract

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
)

func TestPlaceholders(t *testing.T) {
	tests := []struct {
		tpl  string
		want []string
	}{
		{"", nil},
		{"no placeholders", nil},
		{"{title}", []string{"title"}},
		{"{title} and {title_2} and {title}", []string{"title", "title_2"}},
		{"{a}{b}{a}", []string{"a", "b"}},
		{"{ }", nil},
		{"{ title }", nil},
		{"{}", nil},
		{"{{", nil},
		{"}}", nil},
		{"{{title}}", []string{"title"}},
		{"{{}}", nil},
		{`json {"a":1} and {"title": "{x}"}`, []string{"x"}},
		{"{1a} {a-b} {a.b}", nil},
		{"{标题} {é}", nil},
		{"{_} {_1} {A1}", []string{"_", "_1", "A1"}},
		{"{title", nil},
		{"title}", nil},
		{"{{a}", []string{"a"}},
		{"{a{b}", []string{"b"}},
		{"中文{title}中文", []string{"title"}},
		{"{a\n}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.tpl, func(t *testing.T) {
			if got := Placeholders(tt.tpl); !slices.Equal(got, tt.want) {
				t.Errorf("Placeholders(%q) = %q, want %q", tt.tpl, got, tt.want)
			}
		})
	}
}

func TestValidateForm(t *testing.T) {
	title := Field{Key: "title", Label: "Title"}
	sub := Field{Key: "subtitle", Label: "Subtitle"}
	optional := Field{Key: "note", Label: "Note", Required: ptr(false)}
	tests := []struct {
		name    string
		tpl     string
		fields  []Field
		wantErr string
	}{
		{"no placeholders no fields", "a plain prompt", nil, ""},
		{"declared and used", "poster {title} {subtitle}", []Field{title, sub}, ""},
		{"optional unused", "poster {title}", []Field{title, optional}, ""},
		{"optional used", "poster {title} {note}", []Field{title, optional}, ""},
		{"json braces literal", `{"layout": 1} {title}`, []Field{title}, ""},
		{"placeholders without fields", "poster {title} {subtitle} {title}", nil, "prompt_template: has placeholders {title}, {subtitle} but no fields declare them"},
		{"undeclared placeholder", "poster {title} {price}", []Field{title}, "prompt_template: placeholder {price} is not declared in fields"},
		{"title does not declare title_2", "poster {title_2}", []Field{title}, "prompt_template: placeholder {title_2} is not declared in fields"},
		{"required field unused", "poster {title}", []Field{title, sub}, `fields[1]: required field "subtitle" is not used in prompt_template; add {subtitle} or set required to false`},
		{"required field only as literal", "poster { subtitle } {title}", []Field{title, sub}, `fields[1]: required field "subtitle" is not used in prompt_template; add {subtitle} or set required to false`},
		{"field error comes first", "poster {title}", []Field{title, {Key: "x"}}, "fields[1].label: a label is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, ValidateForm(tt.tpl, tt.fields), tt.wantErr)
		})
	}
}

func TestModeOf(t *testing.T) {
	title := []Field{{Key: "title", Label: "Title"}}
	tests := []struct {
		name    string
		tpl     string
		fields  []Field
		spec    string
		want    Mode
		wantErr string
	}{
		{"form", "poster {title}", title, "", ModeForm, ""},
		{"form without placeholders", "a fixed prompt", nil, "", ModeForm, ""},
		{"spec", "", nil, "# Spec\nExpand the description.", ModeSpec, ""},
		{"spec with blank template", "  \n", nil, "# Spec", ModeSpec, ""},
		{"both", "poster {title}", title, "# Spec", "", "skill_spec_md: a generation config takes either prompt_template (form mode) or skill_spec_md (spec mode), not both"},
		{"neither", "", nil, "", "", "prompt_template: a generation config needs prompt_template (form mode) or skill_spec_md (spec mode)"},
		{"blank both", " ", nil, "\t", "", "prompt_template: a generation config needs prompt_template (form mode) or skill_spec_md (spec mode)"},
		{"fields only", "", title, "", "", "prompt_template: a generation config needs prompt_template (form mode) or skill_spec_md (spec mode)"},
		{"spec with fields", "", title, "# Spec", "", "fields: fields are only used with prompt_template (form mode); a skill_spec_md config takes a one-sentence description"},
		{"form errors surface", "poster {title}", nil, "", "", "prompt_template: has placeholders {title} but no fields declare them"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ModeOf(tt.tpl, tt.fields, tt.spec)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("ModeOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSubstitute(t *testing.T) {
	title := Field{Key: "title", Label: "Title"}
	title2 := Field{Key: "title_2", Label: "Second title"}
	a := Field{Key: "a", Label: "A"}
	b := Field{Key: "b", Label: "B"}
	note := Field{Key: "note", Label: "Note", Required: ptr(false)}
	size := Field{Key: "size", Label: "Size", Type: FieldSelect, Options: []Option{OptionFromString("s|Small"), NewOption("m", "Medium"), OptionFromString("3|Three")}}
	optSize := size
	optSize.Required = ptr(false)
	tests := []struct {
		name    string
		tpl     string
		fields  []Field
		input   map[string]any
		want    string
		wantErr string
	}{
		{"simple", "poster of {title}", []Field{title}, map[string]any{"title": "Spring"}, "poster of Spring", ""},
		{"repeated key", "{title}, {title}! {title}?", []Field{title}, map[string]any{"title": "Go"}, "Go, Go! Go?", ""},
		{"adjacent", "{a}{b}{a}", []Field{a, b}, map[string]any{"a": "1", "b": "2"}, "121", ""},
		{"title vs title_2", "{title}/{title_2}", []Field{title, title2}, map[string]any{"title": "T1", "title_2": "T2"}, "T1/T2", ""},
		{"value with braces not re-expanded", "{a} {b}", []Field{a, b}, map[string]any{"a": "{b}", "b": "{a}"}, "{b} {a}", ""},
		{"value with own placeholder", "{a}", []Field{a}, map[string]any{"a": "{a}{a}"}, "{a}{a}", ""},
		{"literal braces kept", `{"k": "{a}"} { a } {{a}}`, []Field{a}, map[string]any{"a": "x"}, `{"k": "x"} { a } {x}`, ""},
		{"optional absent", "[{title}] [{note}]", []Field{title, note}, map[string]any{"title": "T"}, "[T] []", ""},
		{"optional null", "[{title}]  [{note}]  .", []Field{title, note}, map[string]any{"title": "T", "note": nil}, "[T]  []  .", ""},
		{"value whitespace kept", "[{a}]", []Field{a}, map[string]any{"a": "  x \n"}, "[  x \n]", ""},
		{"unicode value", "{title}", []Field{title}, map[string]any{"title": "春天 🌸 {标题}"}, "春天 🌸 {标题}", ""},
		{"unicode placeholder is literal", "{标题} {title}", []Field{title}, map[string]any{"title": "x", "标题": "y"}, "{标题} x", ""},
		{"extra input ignored", "{a}", []Field{a}, map[string]any{"a": "1", "zzz": []any{1}}, "1", ""},
		{"integer float", "{a}", []Field{a}, map[string]any{"a": float64(3)}, "3", ""},
		{"decimal float", "{a}", []Field{a}, map[string]any{"a": 19.99}, "19.99", ""},
		{"big float", "{a}", []Field{a}, map[string]any{"a": 1e21}, "1000000000000000000000", ""},
		{"int", "{a}", []Field{a}, map[string]any{"a": -7}, "-7", ""},
		{"json number", "{a}", []Field{a}, map[string]any{"a": json.Number("2.50")}, "2.50", ""},
		{"bool", "{a}/{b}", []Field{a, b}, map[string]any{"a": true, "b": false}, "true/false", ""},
		{"select value", "size {size}", []Field{size}, map[string]any{"size": "m"}, "size m", ""},
		{"select number value", "size {size}", []Field{size}, map[string]any{"size": 3}, "size 3", ""},
		{"optional select empty", "size [{size}]", []Field{optSize}, map[string]any{"size": ""}, "size []", ""},
		{"no fields no placeholders", "plain", nil, nil, "plain", ""},
		{"select label is not a value", "{size}", []Field{size}, map[string]any{"size": "Medium"}, "", `input.size: "Medium" is not an option; use "s", "m" or "3"`},
		{"array rejected", "{a}", []Field{a}, map[string]any{"a": []any{"x"}}, "", "input.a: must be a string, number or boolean, not an array"},
		{"object rejected", "{a}", []Field{a}, map[string]any{"a": map[string]any{"x": 1}}, "", "input.a: must be a string, number or boolean, not an object"},
		{"other type rejected", "{a}", []Field{a}, map[string]any{"a": []string{"x"}}, "", "input.a: must be a string, number or boolean, not []string"},
		{"NaN rejected", "{a}", []Field{a}, map[string]any{"a": math.NaN()}, "", "input.a: must be a finite number"},
		{"bad json number", "{a}", []Field{a}, map[string]any{"a": json.Number("x")}, "", `input.a: "x" is not a number`},
		{"undeclared placeholder", "{a} {zz}", []Field{a}, map[string]any{"a": "1"}, "", "prompt_template: placeholder {zz} is not declared in fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Substitute(tt.tpl, tt.fields, tt.input)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("Substitute = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSubstituteMissing(t *testing.T) {
	fields := []Field{
		{Key: "title", Label: "Title"},
		{Key: "note", Label: "Note", Required: ptr(false)},
		{Key: "subtitle", Label: "Subtitle"},
	}
	tpl := "{title} {note} {subtitle}"
	tests := []struct {
		name    string
		input   map[string]any
		want    []string
		wantMsg string
	}{
		{"one absent", map[string]any{"subtitle": "s"}, []string{"title"}, "missing required field: title"},
		{"blank and null", map[string]any{"title": "  ", "subtitle": nil}, []string{"title", "subtitle"}, "missing required fields: title, subtitle"},
		{"nil input", nil, []string{"title", "subtitle"}, "missing required fields: title, subtitle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Substitute(tpl, fields, tt.input)
			var missing *MissingFieldsError
			if !errors.As(err, &missing) {
				t.Fatalf("got error %v (%T), want *MissingFieldsError", err, err)
			}
			if !slices.Equal(missing.Keys, tt.want) {
				t.Errorf("Keys = %q, want %q", missing.Keys, tt.want)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("message = %q, want %q", err, tt.wantMsg)
			}
		})
	}
}

func TestSubstituteDeterministic(t *testing.T) {
	fields := []Field{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}, {Key: "c", Label: "C"}}
	input := map[string]any{"a": "1", "b": "{c}", "c": "3"}
	first, err := Substitute("{c}{b}{a}{b}", fields, input)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if got, _ := Substitute("{c}{b}{a}{b}", fields, input); got != first {
			t.Fatalf("Substitute = %q, then %q", first, got)
		}
	}
	if first != "3{c}1{c}" {
		t.Errorf("Substitute = %q, want %q", first, "3{c}1{c}")
	}
}
