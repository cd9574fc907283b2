package graph

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
)

// JSON is the Go side of the JSON scalar: any JSON value, kept raw so that the core decodes and validates
// it exactly as it decodes a REST body.
type JSON = json.RawMessage

// MarshalJSON writes a raw JSON value (null when empty).
func MarshalJSON(v json.RawMessage) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		if len(v) == 0 {
			_, _ = io.WriteString(w, "null")
			return
		}
		_, _ = w.Write(v)
	})
}

// UnmarshalJSON turns a GraphQL input value (already decoded from the query or its variables) back
// into raw JSON.
func UnmarshalJSON(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("JSON: %w", err)
	}
	return raw, nil
}

// StringMap is the Go side of the StringMap scalar: a JSON object of strings.
type StringMap = map[string]string

// MarshalStringMap writes the map as a JSON object.
func MarshalStringMap(m map[string]string) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		if m == nil {
			_, _ = io.WriteString(w, "null")
			return
		}
		raw, _ := json.Marshal(m)
		_, _ = w.Write(raw)
	})
}

// UnmarshalStringMap reads a JSON object whose values are strings.
func UnmarshalStringMap(v any) (map[string]string, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("StringMap: expected an object of strings")
	}
	out := make(map[string]string, len(obj))
	for k, val := range obj {
		s, ok := val.(string)
		if !ok {
			return nil, fmt.Errorf("StringMap: value of %s must be a string, not %s", strconv.Quote(k), kindOf(val))
		}
		out[k] = s
	}
	return out, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	}
	return "a number"
}

// TemplateConfig is the Go side of the TemplateConfig union: a models.ImageConfigView or a
// models.ArticleConfigView.
type TemplateConfig any

// ModelCatalogue is the Go side of the ModelCatalogue union: a *models.ImageModels or a *models.VideoModels.
type ModelCatalogue any
