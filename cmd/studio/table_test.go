package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"
)

// TestTablesAlignWithChineseText lists templates with Chinese and Latin names and checks that every
// column starts at the same terminal column on every line (a Chinese character takes two cells).
func TestTablesAlignWithChineseText(t *testing.T) {
	ts := startServer(t, nil)
	key := ts.tenantKey(0)
	clientEnv(t, ts.srv.URL, key)
	for _, tpl := range []struct{ slug, name string }{{"poster-cn", "春节海报"}, {"mixed", "新品 launch 文案"}, {"latin", "Plain name"}} {
		body, _ := json.Marshal(map[string]any{"type": "article", "slug": tpl.slug, "zh_name": tpl.name, "generation_configs": []any{map[string]any{
			"format": "xiaohongshu", "prompt_template": "为{product}写一篇文案", "fields": []any{map[string]any{"key": "product", "label": "产品"}}}}})
		req, _ := http.NewRequest("POST", ts.srv.URL+"/api/templates", bytes.NewReader(body))
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("create template %s: %d", tpl.slug, res.StatusCode)
		}
	}
	out := run("templates", "--type", "article").expect(t, exitOK).out
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 4 || !strings.Contains(out, "春节海报") {
		t.Fatalf("templates:\n%s", out)
	}
	header := lines[0]
	for _, col := range []string{"TYPE", "SLUG", "NAME", "SOURCE"} {
		want := runewidth.StringWidth(header[:strings.Index(header, col)])
		for _, line := range lines[1:] {
			// The cell of this column starts where the header's does: the text before it is as wide.
			at := columnStart(line, want)
			if at < 0 || (at > 0 && line[at-1] != ' ') || line[at] == ' ' {
				t.Errorf("column %s does not start at cell %d in %q:\n%s", col, want, line, out)
			}
		}
	}
}

// columnStart returns the byte offset in line where the display width reaches cells, or -1.
func columnStart(line string, cells int) int {
	w := 0
	for i, r := range line {
		if w == cells {
			return i
		}
		if w > cells {
			return -1
		}
		w += runewidth.RuneWidth(r)
	}
	return -1
}
