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

// TestConsoleMultipartFileNamesAreChecked: a console form whose file part carries a NUL, invalid UTF-8
// or an overlong name in its field or file name is refused with 400, and no job is submitted.
func TestConsoleMultipartFileNamesAreChecked(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 5)
	b := e.browser()
	b.signIn(key)
	csrf := b.csrf()
	for _, c := range []struct{ field, file string }{
		{"image", "a\x00b.png"}, {"image", "a\xffb.png"}, {"image", strings.Repeat("a", 300) + ".png"}, {"im\x00age", "a.png"},
	} {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("csrf", csrf)
		_ = mw.WriteField("prompt", "a cat")
		_ = mw.WriteField("ratio", "1:1")
		w, _ := mw.CreateFormFile(c.field, c.file)
		_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n"))
		_ = mw.Close()
		p := b.doBody(http.MethodPost, "/console/jobs", mw.FormDataContentType(), buf.Bytes())
		if p.Status != http.StatusBadRequest {
			t.Fatalf("file part %q %q: %d %s", c.field, c.file, p.Status, excerpt(p.Body))
		}
	}
	if _, body := e.api("GET", "/api/balance", key, nil); body["credits"] != float64(5) {
		t.Fatalf("balance moved: %v", body)
	}
}
