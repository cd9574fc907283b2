package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// KeyPattern is the regular expression every field key and placeholder key matches.
const KeyPattern = `^[A-Za-z_][A-Za-z0-9_]*$`

// FieldText is the single-line text field type, the default when type is absent.
const FieldText = "text"

// FieldTextarea is the multi-line text field type.
const FieldTextarea = "textarea"

// FieldSelect is the field type whose value is one of its options.
const FieldSelect = "select"

// fieldTypes lists the field types in documentation order.
var fieldTypes = []string{FieldText, FieldTextarea, FieldSelect}

// skillFieldTypes lists the field types a form skill may use (2.4).
var skillFieldTypes = []string{FieldText, FieldTextarea}

// Field is one item of a template's fields: it declares the placeholder {Key}
// and how the form asks for its value.
type Field struct {
	Key         string   `json:"key"`
	Label       string   `json:"label"`
	Type        string   `json:"type,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	Help        string   `json:"help,omitempty"`
	Required    *bool    `json:"required,omitempty"`
	Options     []Option `json:"options,omitempty"`
}

// IsRequired reports whether the field must be filled; absent Required means true.
func (f Field) IsRequired() bool {
	return f.Required == nil || *f.Required
}

// EffectiveType returns the field type with the default applied (text when absent).
func (f Field) EffectiveType() string {
	if f.Type == "" {
		return FieldText
	}
	return f.Type
}

// Option is one choice of a select field. It is read from either a string
// "value|label" (a string without "|" is both value and label) or an object
// {"label", "value"}, and is written back exactly in the form it was read.
type Option struct {
	raw   json.RawMessage
	value string
	label string
	ok    bool
}

// NewOption returns an option in object form {"label", "value"}.
func NewOption(value, label string) Option {
	raw, _ := json.Marshal(struct {
		Label string `json:"label"`
		Value string `json:"value"`
	}{label, value})
	var o Option
	o.parse(raw)
	return o
}

// OptionFromString returns an option in string form "value|label" or "value".
func OptionFromString(s string) Option {
	raw, _ := json.Marshal(s)
	var o Option
	o.parse(raw)
	return o
}

// Value returns the value substituted into the template when the option is chosen.
func (o Option) Value() string { return o.value }

// Label returns the text shown in the form; it falls back to the value when empty.
func (o Option) Label() string {
	if o.label == "" {
		return o.value
	}
	return o.label
}

// MarshalJSON writes the option in the form it was read.
func (o Option) MarshalJSON() ([]byte, error) {
	if o.raw == nil {
		return []byte(`""`), nil
	}
	return o.raw, nil
}

// UnmarshalJSON reads any JSON value; a value that is neither a string nor an
// object with a string "value" is kept and reported by field validation.
func (o *Option) UnmarshalJSON(data []byte) error {
	if !json.Valid(data) {
		return fmt.Errorf("contract: invalid JSON for option")
	}
	o.parse(bytes.Clone(data))
	return nil
}

// parse fills the option from raw JSON, which it keeps.
func (o *Option) parse(raw []byte) {
	*o = Option{raw: raw}
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 {
		return
	}
	switch trimmed[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return
		}
		o.value, o.label, _ = strings.Cut(s, "|")
		o.ok = true
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return
		}
		if json.Unmarshal(obj["value"], &o.value) != nil {
			return
		}
		if l, has := obj["label"]; has && string(l) != "null" && json.Unmarshal(l, &o.label) != nil {
			return
		}
		o.ok = true
	}
}

// isKey reports whether s matches KeyPattern.
func isKey(s string) bool {
	return s != "" && keyEnd(s, 0) == len(s)
}

// keyEnd returns the index just past the key that starts at s[i], or i when none does.
func keyEnd(s string, i int) int {
	if i >= len(s) || !isKeyStart(s[i]) {
		return i
	}
	for i++; i < len(s) && (isKeyStart(s[i]) || '0' <= s[i] && s[i] <= '9'); i++ {
	}
	return i
}

// isKeyStart reports whether c may begin a key.
func isKeyStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// ValidateFields checks a fields declaration on its own: keys, labels, types
// and options. It does not look at the prompt template (see ValidateForm).
func ValidateFields(fields []Field) error {
	seen := make(map[string]int, len(fields))
	for i, f := range fields {
		path := fmt.Sprintf("fields[%d]", i)
		switch {
		case f.Key == "":
			return invalid(path+".key", "a key is required")
		case !isKey(f.Key):
			return invalid(path+".key", "%q is not a valid key; use ASCII letters, digits and _, not starting with a digit (%s)", f.Key, KeyPattern)
		}
		if j, dup := seen[f.Key]; dup {
			return invalid(path+".key", "duplicate key %q (also fields[%d])", f.Key, j)
		}
		seen[f.Key] = i
		if strings.TrimSpace(f.Label) == "" {
			return invalid(path+".label", "a label is required")
		}
		switch f.EffectiveType() {
		case FieldText, FieldTextarea:
			if len(f.Options) > 0 {
				return invalid(path+".options", "options are only used by select fields; set type to %q", FieldSelect)
			}
		case FieldSelect:
			if err := validateOptions(path+".options", f.Options); err != nil {
				return err
			}
		default:
			return invalid(path+".type", "unknown type %q; use %s", f.Type, orList(fieldTypes))
		}
	}
	return nil
}

// ValidateSkillFields checks the fields of a form skill: the rules of
// ValidateFields, and types limited to text and textarea (2.4).
func ValidateSkillFields(fields []Field) error {
	if err := ValidateFields(fields); err != nil {
		return err
	}
	for i, f := range fields {
		if t := f.EffectiveType(); t != FieldText && t != FieldTextarea {
			return invalid(fmt.Sprintf("fields[%d].type", i), "a skill field must be %s, not %q", orList(skillFieldTypes), t)
		}
	}
	return nil
}

// validateOptions checks the options of a select field.
func validateOptions(path string, options []Option) error {
	if len(options) == 0 {
		return invalid(path, "a select field needs at least one option")
	}
	seen := make(map[string]int, len(options))
	for i, o := range options {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !o.ok {
			return invalid(p, `an option must be a string "value|label" or an object {"label", "value"} with string members`)
		}
		if strings.TrimSpace(o.value) == "" {
			return invalid(p, "an option needs a non-empty value")
		}
		if j, dup := seen[o.value]; dup {
			return invalid(p, "duplicate option value %q (also %s[%d])", o.value, path, j)
		}
		seen[o.value] = i
	}
	return nil
}

// orList renders values as "a, b or c".
func orList(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}
