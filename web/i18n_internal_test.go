package web

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCatalogueCoversEveryTranslatedText reads the pages' sources: every literal text they translate
// (T, Tf, label) and every page title and navigation label of a buyer has its Chinese entry.
func TestCatalogueCoversEveryTranslatedText(t *testing.T) {
	files, _ := filepath.Glob("*.templ")
	goFiles, _ := filepath.Glob("*.go")
	for _, f := range goFiles {
		if !strings.HasSuffix(f, "_templ.go") && !strings.HasSuffix(f, "_test.go") {
			files = append(files, f)
		}
	}
	callRE := regexp.MustCompile(`(?:\.T|\.Tf|label\([^,()]+,)\(?\s*"((?:[^"\\]|\\.)*)"`)
	found := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range callRE.FindAllStringSubmatch(string(src), -1) {
			found++
			key := strings.ReplaceAll(m[1], `\"`, `"`)
			if zh, ok := catalogue[key]; !ok || zh == "" || zh == key {
				t.Errorf("%s: %q has no Chinese text in the catalogue", f, key)
			}
		}
	}
	if found < 100 {
		t.Fatalf("found %d translated texts: the scan is broken", found)
	}
	for _, title := range []string{"Dashboard", "Jobs", "Templates", "Error"} {
		if _, ok := catalogue[title]; !ok {
			t.Errorf("the buyer's page title %q has no Chinese text", title)
		}
	}
	for _, n := range notices {
		if strings.Contains(n, "ob submitted") || strings.Contains(n, "ideo submitted") {
			if _, ok := catalogue[n]; !ok {
				t.Errorf("notice %q, shown to buyers, has no Chinese text", n)
			}
		}
	}
}

// TestPageLangReadsAcceptLanguage checks the choice between English and Chinese.
func TestPageLangReadsAcceptLanguage(t *testing.T) {
	for _, c := range []struct {
		header string
		buyer  bool
		want   lang
	}{
		{"", true, langZH}, {"", false, langEN}, {"fr-FR,de;q=0.5", true, langZH}, {"fr-FR", false, langEN},
		{"zh-CN,zh;q=0.9,en;q=0.8", false, langZH}, {"en-US,en;q=0.9,zh-CN;q=0.8", true, langEN},
		{"en;q=0.3, zh-TW;q=0.7", false, langZH}, {"zh;q=0.5, en;q=0.5", false, langZH}, {"EN-gb", true, langEN},
		{"zh-Hans-CN", false, langZH}, {"english", true, langZH},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if c.header != "" {
			r.Header.Set("Accept-Language", c.header)
		}
		if got := pageLang(r, c.buyer); got != c.want {
			t.Errorf("Accept-Language %q (buyer %v) = %s, want %s", c.header, c.buyer, got, c.want)
		}
	}
}
