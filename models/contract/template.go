package contract

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Mode is how a generation config produces its prompt.
type Mode string

// ModeForm substitutes the user's field values into prompt_template, with no model call.
const ModeForm Mode = "form"

// ModeSpec lets a model expand the user's one-sentence description with skill_spec_md.
const ModeSpec Mode = "spec"

// walkTemplate calls emit for each literal run and each placeholder key of tpl, in order.
func walkTemplate(tpl string, emit func(text string, placeholder bool)) {
	start, i := 0, 0
	for {
		j := strings.IndexByte(tpl[i:], '{')
		if j < 0 {
			break
		}
		open := i + j
		end := keyEnd(tpl, open+1)
		if end > open+1 && end < len(tpl) && tpl[end] == '}' {
			if open > start {
				emit(tpl[start:open], false)
			}
			emit(tpl[open+1:end], true)
			start = end + 1
			i = start
		} else {
			i = open + 1
		}
	}
	if start < len(tpl) {
		emit(tpl[start:], false)
	}
}

// Placeholders returns the distinct placeholder keys of tpl in order of first appearance.
func Placeholders(tpl string) []string {
	var keys []string
	walkTemplate(tpl, func(text string, placeholder bool) {
		if placeholder && !slices.Contains(keys, text) {
			keys = append(keys, text)
		}
	})
	return keys
}

// ValidateForm checks a form-mode recipe: the fields themselves, placeholders
// without fields, placeholders not declared, and required fields not used.
func ValidateForm(promptTemplate string, fields []Field) error {
	keys := Placeholders(promptTemplate)
	if len(keys) > 0 && len(fields) == 0 {
		return invalid("prompt_template", "has placeholders %s but no fields declare them", braced(keys))
	}
	if err := ValidateFields(fields); err != nil {
		return err
	}
	for _, k := range keys {
		if !slices.ContainsFunc(fields, func(f Field) bool { return f.Key == k }) {
			return invalid("prompt_template", "placeholder {%s} is not declared in fields", k)
		}
	}
	for i, f := range fields {
		if f.IsRequired() && !slices.Contains(keys, f.Key) {
			return invalid(fmt.Sprintf("fields[%d]", i), "required field %q is not used in prompt_template; add {%s} or set required to false", f.Key, f.Key)
		}
	}
	return nil
}

// ModeOf checks that a generation config uses exactly one mode and returns it:
// form (prompt_template, checked by ValidateForm) or spec (skill_spec_md, no fields).
func ModeOf(promptTemplate string, fields []Field, skillSpecMD string) (Mode, error) {
	hasForm := strings.TrimSpace(promptTemplate) != ""
	hasSpec := strings.TrimSpace(skillSpecMD) != ""
	switch {
	case hasForm && hasSpec:
		return "", invalid("skill_spec_md", "a generation config takes either prompt_template (form mode) or skill_spec_md (spec mode), not both")
	case hasSpec:
		if len(fields) > 0 {
			return "", invalid("fields", "fields are only used with prompt_template (form mode); a skill_spec_md config takes a one-sentence description")
		}
		return ModeSpec, nil
	case hasForm:
		if err := ValidateForm(promptTemplate, fields); err != nil {
			return "", err
		}
		return ModeForm, nil
	default:
		return "", invalid("prompt_template", "a generation config needs prompt_template (form mode) or skill_spec_md (spec mode)")
	}
}

// Substitute replaces every {key} placeholder of tpl with the value of that
// field in input, in one left-to-right pass: values are inserted verbatim and
// never re-scanned, and {title} never matches inside {title_2}.
//
// Values may be strings, numbers or booleans; arrays, objects and other types
// are rejected. A select value must be one of its option values. Required
// fields that are absent, null or blank are reported together as a
// *MissingFieldsError; empty optional fields become "". Input keys that no
// field declares are ignored; a placeholder that no field declares is an error.
func Substitute(tpl string, fields []Field, input map[string]any) (string, error) {
	values := make(map[string]string, len(fields))
	var missing []string
	for _, f := range fields {
		v, err := inputText(f.Key, input[f.Key])
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(v) == "" {
			if f.IsRequired() {
				missing = append(missing, f.Key)
			}
			values[f.Key] = ""
			continue
		}
		if f.EffectiveType() == FieldSelect && !slices.ContainsFunc(f.Options, func(o Option) bool { return o.Value() == v }) {
			return "", invalid("input."+f.Key, "%q is not an option; use %s", v, optionValues(f.Options))
		}
		values[f.Key] = v
	}
	var b strings.Builder
	b.Grow(len(tpl))
	var undeclared string
	walkTemplate(tpl, func(text string, placeholder bool) {
		if !placeholder {
			b.WriteString(text)
			return
		}
		v, ok := values[text]
		if !ok && undeclared == "" {
			undeclared = text
		}
		b.WriteString(v)
	})
	if undeclared != "" {
		return "", invalid("prompt_template", "placeholder {%s} is not declared in fields", undeclared)
	}
	if len(missing) > 0 {
		return "", &MissingFieldsError{Keys: missing}
	}
	return b.String(), nil
}

// inputText renders one input value as text, or rejects its type.
func inputText(key string, v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case json.Number:
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return "", invalid("input."+key, "%q is not a number", string(v))
		}
		return string(v), nil
	case float64:
		return formatFloat(key, v, 64)
	case float32:
		return formatFloat(key, float64(v), 32)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v), nil
	case []any:
		return "", invalid("input."+key, "must be a string, number or boolean, not an array")
	case map[string]any:
		return "", invalid("input."+key, "must be a string, number or boolean, not an object")
	default:
		return "", invalid("input."+key, "must be a string, number or boolean, not %T", v)
	}
}

// formatFloat renders a finite number in plain decimal notation without a trailing ".0".
func formatFloat(key string, f float64, bits int) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", invalid("input."+key, "must be a finite number")
	}
	return strconv.FormatFloat(f, 'f', -1, bits), nil
}

// braced renders keys as "{a}, {b}".
func braced(keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = "{" + k + "}"
	}
	return strings.Join(parts, ", ")
}

// optionValues renders the option values of a select field as "a, b or c".
func optionValues(options []Option) string {
	values := make([]string, len(options))
	for i, o := range options {
		values[i] = strconv.Quote(o.Value())
	}
	return orList(values)
}
