package server

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeRequestPathMatchesTheCode follows the README's "A generate request, file by file": every
// step names a file that exists and functions that the file defines, and there are at most ten files.
func TestReadmeRequestPathMatchesTheCode(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "### A generate request, file by file")
	if start < 0 {
		t.Fatal(`README.md has no section "### A generate request, file by file"`)
	}
	text = text[start:]
	if end := strings.Index(text[4:], "\n#"); end > 0 {
		text = text[:end+4]
	}
	step := regexp.MustCompile("(?m)^\\d+\\. `([^`]+\\.go)` — (.*)$")
	name := regexp.MustCompile("`([A-Za-z][A-Za-z0-9]*)`")
	steps := step.FindAllStringSubmatch(text, -1)
	if len(steps) == 0 || len(steps) > 10 {
		t.Fatalf("the request path has %d files, want 1 to 10", len(steps))
	}
	for _, s := range steps {
		src, err := os.ReadFile("../../" + s[1])
		if err != nil {
			t.Errorf("step %s: %v", s[1], err)
			continue
		}
		names := name.FindAllStringSubmatch(s[2], -1)
		found := 0
		for _, n := range names {
			def := regexp.MustCompile(`(?m)^func (\([^)]*\) )?` + n[1] + `[\[(]`)
			if def.Match(src) {
				found++
			}
		}
		if found == 0 {
			t.Errorf("step %s names %v, but the file defines none of them", s[1], names)
		}
	}
}
