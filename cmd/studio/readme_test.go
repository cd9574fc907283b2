package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var markdownLink = regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`)

// TestReadmeLinksPointIntoTheRepository fails when the README links to a path that a clone does not hold.
func TestReadmeLinksPointIntoTheRepository(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, m := range markdownLink.FindAllStringSubmatch(string(data), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		links++
		if strings.HasPrefix(target, "..") || filepath.IsAbs(target) {
			t.Errorf("README links outside the repository: %s", target)
			continue
		}
		if _, err := os.Stat(filepath.Join("../..", target)); err != nil {
			t.Errorf("README links to %s, which is not in the repository: %v", target, err)
		}
	}
	if !strings.Contains(string(data), "(docs/interface-spec.md)") || !strings.Contains(string(data), "(docs/decisions.md)") {
		t.Error("README does not link the interface specification and the decisions in docs/")
	}
	if links == 0 {
		t.Error("no relative links found in README.md")
	}
}

// TestSpecCopyMatchesTheSharedSpec keeps docs/ equal to the contract it copies, where that contract is
// at hand (beside the repository); a clone without it skips.
func TestSpecCopyMatchesTheSharedSpec(t *testing.T) {
	for _, name := range []string{"interface-spec.md", "decisions.md"} {
		shared, err := os.ReadFile(filepath.Join("../../../shared/spec", name))
		if err != nil {
			t.Skipf("no shared spec beside the repository: %v", err)
		}
		copied, err := os.ReadFile(filepath.Join("../../docs", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(shared, copied) {
			t.Errorf("docs/%s differs from ../shared/spec/%s: copy it again", name, name)
		}
	}
}
