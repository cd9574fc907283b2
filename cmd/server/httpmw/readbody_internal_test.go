package httpmw

import (
	"bytes"
	"strings"
	"testing"
)

// TestReadBodyKeepsTheBound: a body is read whole into one buffer of its declared length, and never
// beyond maxBody+1 bytes, whatever it declared.
func TestReadBodyKeepsTheBound(t *testing.T) {
	for _, c := range []struct {
		body     string
		declared int64
		max      int64
		want     string
		wantErr  bool
	}{
		{"hello", 5, 100, "hello", false},
		{"hello", -1, 100, "hello", false},
		{"hello world", 5, 100, "hello world", false}, // longer than declared: read on, within the bound
		{"hello world", 5, 7, "hello wo", false},      // ... and never past maxBody+1
		{"hi", 5, 100, "hi", true},                    // shorter than declared
		{strings.Repeat("x", 50), 200, 10, strings.Repeat("x", 11), false},
		{"short", preallocMax + 1, 2 * preallocMax, "short", false}, // a large declared length reserves nothing up front
	} {
		got, err := readBody(bytes.NewReader([]byte(c.body)), c.declared, c.max)
		if string(got) != c.want || (err != nil) != c.wantErr {
			t.Errorf("readBody(%q, declared %d, max %d) = %q, %v; want %q, error %v", c.body, c.declared, c.max, got, err, c.want, c.wantErr)
		}
	}
}
