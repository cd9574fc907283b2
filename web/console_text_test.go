package web_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleFormUnstorableText: a console form carrying a NUL or invalid UTF-8, url-encoded or
// multipart, is refused with 400 naming the field, and no job is submitted.
func TestConsoleFormUnstorableText(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 5)
	b := e.browser()
	b.signIn(key)
	csrf := b.csrf()
	for _, prompt := range []string{"a\x00b", "a\xffb"} {
		p := b.post("/console/jobs", url.Values{"csrf": {csrf}, "prompt": {prompt}, "ratio": {"1:1"}})
		if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, `field \"prompt\"`) {
			t.Fatalf("url-encoded %q: %d %s", prompt, p.Status, excerpt(p.Body))
		}
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("csrf", csrf)
		_ = mw.WriteField("prompt", prompt)
		_ = mw.WriteField("ratio", "1:1")
		_ = mw.Close()
		p = b.doBody(http.MethodPost, "/console/jobs", mw.FormDataContentType(), buf.Bytes())
		if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "prompt") {
			t.Fatalf("multipart %q: %d %s", prompt, p.Status, excerpt(p.Body))
		}
	}
	if _, body := e.api("GET", "/api/balance", key, nil); body["credits"] != float64(5) {
		t.Fatalf("balance moved: %v", body)
	}
}
