package contract

import (
	"strconv"
	"strings"
)

// Variable is one whitelisted placeholder role that image-to-template may output.
type Variable struct {
	Name    string `json:"name"`
	Meaning string `json:"meaning"`
}

// whitelist is the variable whitelist of 2.3, in its published order.
var whitelist = []Variable{
	{"title", "main title"},
	{"subtitle", "subtitle or theme line"},
	{"subject", "picture subject (person, product, character)"},
	{"date", "date or time"},
	{"location", "place, city, venue"},
	{"watermark", "watermark, signature, logo text"},
	{"body", "body text"},
	{"cta", "call to action (button text)"},
	{"style", "style and colour tone (not text; taken from the picture)"},
}

// Whitelist returns a copy of the variable whitelist in its published order.
func Whitelist() []Variable {
	return append([]Variable(nil), whitelist...)
}

// BaseName returns key without a trailing "_N" repeat number ("subtitle_2" → "subtitle").
func BaseName(key string) string {
	i := strings.LastIndexByte(key, '_')
	if i <= 0 || i == len(key)-1 {
		return key
	}
	if _, err := strconv.ParseUint(key[i+1:], 10, 32); err != nil {
		return key
	}
	return key[:i]
}

// IsWhitelisted reports whether key's base name is a whitelisted variable.
func IsWhitelisted(key string) bool {
	return isVariable(BaseName(key))
}

// isVariable reports whether name is exactly a whitelisted variable name.
func isVariable(name string) bool {
	for _, v := range whitelist {
		if v.Name == name {
			return true
		}
	}
	return false
}

// NormalizePlaceholders turns placeholder roles proposed for an image, in
// order, into template keys: each name is trimmed, unwrapped from one pair of
// braces and lower-cased; names whose base name is not whitelisted are
// discarded; the first use of a role keeps the plain name and later uses are
// numbered "_2", "_3", and so on, whatever number the proposal carried.
func NormalizePlaceholders(names []string) []string {
	counts := make(map[string]int)
	keys := make([]string, 0, len(names))
	for _, name := range names {
		name = strings.ToLower(strings.TrimSpace(name))
		if len(name) >= 2 && name[0] == '{' && name[len(name)-1] == '}' {
			name = strings.TrimSpace(name[1 : len(name)-1])
		}
		base := BaseName(name)
		if !isVariable(base) {
			continue
		}
		counts[base]++
		if n := counts[base]; n > 1 {
			keys = append(keys, base+"_"+strconv.Itoa(n))
		} else {
			keys = append(keys, base)
		}
	}
	return keys
}
