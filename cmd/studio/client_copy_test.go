package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCopyWritesFromACopyTemplate: `studio copy` writes copy from a copy template of the tenant over the
// real API and prints title, body and hashtags; a missing field is the server's 400 (exit 1), an unknown
// template 404 (exit 4).
func TestCopyWritesFromACopyTemplate(t *testing.T) {
	ts := startServer(t, nil) // the built-in upstreams
	key := ts.tenantKey(10)
	clientEnv(t, ts.srv.URL, key)
	tpl := `{"type":"article","slug":"tea-note","zh_name":"茶饮笔记","generation_configs":[{"format":"xiaohongshu",
		"prompt_template":"为{shop}写一篇小红书笔记","fields":[{"key":"shop","label":"店名"}]}]}`
	req, _ := http.NewRequest("POST", ts.srv.URL+"/api/templates", bytes.NewBufferString(tpl))
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("create the copy template: %v %v", err, res)
	}
	res.Body.Close()

	r := run("copy", "--template", "tea-note", "--input", "shop=Lu Yu Tea").expect(t, exitOK)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "Lu Yu Tea") || lines[2] == "" || !strings.HasPrefix(lines[4], "#LuYuTea") {
		t.Fatalf("copy printed:\n%s", r.out)
	}
	var art map[string]any
	if err := json.Unmarshal([]byte(run("copy", "--template", "tea-note", "--input", "shop=Lu Yu Tea", "--json").expect(t, exitOK).out), &art); err != nil ||
		art["format"] != "xiaohongshu" || art["title"] == "" {
		t.Fatalf("copy --json: %v %v", err, art)
	}
	if r := run("copy", "--template", "tea-note").expect(t, exitUsage); !strings.Contains(r.err, "shop") {
		t.Fatalf("missing field: %s", r.err)
	}
	run("copy", "--template", "no-such-template", "--input", "shop=x").expect(t, exitNotFound)
	run("copy").expect(t, exitUsage)
}

// TestJobTimesNameTheirZone: `studio jobs` shows when a job was created in the local zone and names
// the zone, so that a reader in Shanghai and one in UTC read the same instant.
func TestJobTimesNameTheirZone(t *testing.T) {
	ts := startServer(t, nil)
	clientEnv(t, ts.srv.URL, ts.tenantKey(5))
	saved := time.Local
	time.Local = time.FixedZone("CST", 8*3600)
	t.Cleanup(func() { time.Local = saved })
	job := run("generate", "--prompt", "a red fox", "--json").expect(t, exitOK).json(t)
	created, err := time.Parse(time.RFC3339Nano, job["created_at"].(string))
	if err != nil {
		t.Fatalf("created_at %v: %v", job["created_at"], err)
	}
	want := created.In(time.Local).Format("2006-01-02 15:04:05") + " UTC+08:00"
	if r := run("jobs").expect(t, exitOK); !strings.Contains(r.out, want) {
		t.Fatalf("jobs shows no %q:\n%s", want, r.out)
	}
}
