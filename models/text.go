package models

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Text that PostgreSQL cannot store (a NUL character, bytes that are not UTF-8) is refused at the edge of
// every surface with one rule: CheckText for a single value, CheckJSONText for a JSON body, CheckValues
// for query strings and forms, CheckArgs for decoded arguments (GraphQL). The REST, GraphQL and console
// surfaces call these before any decoding of their own, so no such text reaches the core or the database.

// CheckText refuses a value holding a NUL character or invalid UTF-8, naming the field.
func CheckText(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return Invalid("%s contains a NUL character (U+0000), which cannot be stored: remove it", fieldName(field))
	}
	if !utf8.ValidString(s) {
		return Invalid("%s is not valid UTF-8 text: send UTF-8", fieldName(field))
	}
	return nil
}

func fieldName(field string) string {
	if field == "" {
		return "the request"
	}
	return "field " + strconv.Quote(strings.ToValidUTF8(strings.ReplaceAll(field, "\x00", ""), "?"))
}

// CheckValues checks every name and value of a query string or form; where names the part (e.g. "query").
func CheckValues(where string, vals map[string][]string) error {
	for name, list := range vals {
		if err := CheckText(where+" parameter name", name); err != nil {
			return err
		}
		for _, v := range list {
			if err := CheckText(name, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckJSONText walks a JSON document and checks every string and object key, naming the first offending
// one by its path (e.g. "items[2].prompt"). A body that is not valid JSON passes: the decoder of the
// endpoint answers it with its own message. Escapes are decoded first, so "\u0000" is a NUL too.
func CheckJSONText(body []byte) error {
	if utf8.Valid(body) && bytes.IndexByte(body, 0) < 0 && !bytes.Contains(body, []byte(`\u0000`)) {
		return nil // the common case: nothing to find
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		key    string // object: the current key; array: unused
		index  int
		atKey  bool // object: the next token is a key
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for i, f := range stack {
			if f.object {
				if i > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			}
		}
		return b.String()
	}
	prev := dec.InputOffset()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // not JSON: left to the endpoint's decoder
		}
		end := dec.InputOffset()
		raw := body[prev:end]
		prev = end
		if d, ok := tok.(json.Delim); ok {
			if (d == '{' || d == '[') && len(stack) > 0 && !stack[len(stack)-1].object {
				stack[len(stack)-1].index++
			}
			if len(stack) > 10000 {
				return nil // deeper than encoding/json decodes: the endpoint refuses it
			}
			switch d {
			case '{':
				stack = append(stack, frame{object: true, atKey: true})
			case '[':
				stack = append(stack, frame{index: -1})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].atKey = true
				}
			}
			continue
		}
		top := len(stack) - 1
		if top >= 0 && !stack[top].object {
			stack[top].index++
		}
		if s, ok := tok.(string); ok {
			if top >= 0 && stack[top].object && stack[top].atKey {
				stack[top].key = strings.ToValidUTF8(s, "?")
				if err := checkRaw(path(), s, raw); err != nil {
					return err
				}
				stack[top].atKey = false
				continue
			}
			if err := checkRaw(path(), s, raw); err != nil {
				return err
			}
		}
		if top >= 0 && stack[top].object {
			stack[top].atKey = true
		}
	}
}

// checkRaw checks a decoded JSON string and its raw bytes (the decoder silently replaces invalid UTF-8).
func checkRaw(field, s string, raw []byte) error {
	if err := CheckText(field, s); err != nil {
		return err
	}
	if !utf8.Valid(raw) {
		return CheckText(field, string(raw))
	}
	return nil
}

// CheckArgs walks decoded arguments (maps, slices, structs, pointers) and checks every string in them,
// naming it by its path from name.
func CheckArgs(name string, v any) error {
	return checkReflect(name, reflect.ValueOf(v), 0)
}

func checkReflect(path string, v reflect.Value, depth int) error {
	if depth > 64 || !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		return CheckText(path, v.String())
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkReflect(path, v.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes (uploads), not text
		}
		for i := 0; i < v.Len(); i++ {
			if err := checkReflect(path+"["+strconv.Itoa(i)+"]", v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			k := iter.Key()
			key := ""
			if k.Kind() == reflect.String {
				key = k.String()
				if err := CheckText(path, key); err != nil {
					return err
				}
			}
			if err := checkReflect(join(path, key), iter.Value(), depth+1); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := f.Name
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
				name = tag
			}
			if err := checkReflect(join(path, name), v.Field(i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
