package web_test

import (
	"bytes"
	"encoding/binary"
	"html"
	"image/png"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"studio/models"
)

// TestSlugInputPatternMatchesTheServerRule checks that the editor's slug pattern attribute is the
// browser form of the server's rule (models.SlugPattern): without anchors (pattern is anchored by the
// browser), every "-" inside a class escaped (the v flag browsers compile pattern with refuses a bare
// one), and accepting and refusing the same slugs. TestBrowserEveryPage checks it in Chromium.
func TestSlugInputPatternMatchesTheServerRule(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 5)
	b := e.browser()
	b.signIn(key)
	p := b.get("/console/templates/new")
	m := regexp.MustCompile(`id="slug"[^>]* pattern="([^"]*)"`).FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no slug pattern on the editor: %s", excerpt(p.Body))
	}
	attr := html.UnescapeString(m[1])
	if attr != models.SlugInputPattern {
		t.Fatalf("pattern attribute %q, want models.SlugInputPattern %q", attr, models.SlugInputPattern)
	}
	if strings.HasPrefix(attr, "^") || strings.HasSuffix(attr, "$") {
		t.Errorf("pattern %q carries anchors", attr)
	}
	for _, class := range regexp.MustCompile(`\[[^\]]*\]`).FindAllString(attr, -1) {
		if inner := class[1 : len(class)-1]; strings.HasPrefix(inner, "-") || (strings.HasSuffix(inner, "-") && !strings.HasSuffix(inner, `\-`)) {
			t.Errorf("class %s of %q has a bare '-': invalid under the v flag", class, attr)
		}
	}
	server := regexp.MustCompile(models.SlugPattern)
	browser := regexp.MustCompile(`^(?:` + attr + `)$`)
	for _, s := range []string{"ab", "a-", "acme-poster", "0-9", "a", "-ab", "Ab", "a_b", "a b", "a.b", "ab-", "a--b", "é1",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "", "a\nb"} {
		if server.MatchString(s) != browser.MatchString(s) {
			t.Errorf("slug %q: server %v, pattern attribute %v", s, server.MatchString(s), browser.MatchString(s))
		}
	}
}

// TestEveryPageHasAnIcon checks that /favicon.ico answers with the embedded icon, that every kind of
// page links to it, that the link resolves, and that the device page's policy lets it load.
func TestEveryPageHasAnIcon(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 5)
	anon := e.browser()
	ico := anon.get("/favicon.ico")
	if ico.Status != http.StatusOK || ico.Header.Get("Content-Type") != "image/x-icon" {
		t.Fatalf("/favicon.ico = %d %q", ico.Status, ico.Header.Get("Content-Type"))
	}
	raw := []byte(ico.Body)
	if len(raw) < 22 || binary.LittleEndian.Uint16(raw[2:4]) != 1 || binary.LittleEndian.Uint16(raw[4:6]) < 1 {
		t.Fatalf("/favicon.ico is no icon: %q", raw[:min(22, len(raw))])
	}
	off := binary.LittleEndian.Uint32(raw[18:22])
	if img, err := png.Decode(bytes.NewReader(raw[off:])); err != nil || img.Bounds().Dx() != 32 {
		t.Fatalf("the icon's image: %v", err)
	}
	if head := anon.do(http.MethodHead, "/favicon.ico", nil); head.Status != http.StatusOK {
		t.Fatalf("HEAD /favicon.ico = %d", head.Status)
	}
	signedIn := e.browser()
	signedIn.signIn(key)
	iconRE := regexp.MustCompile(`<link rel="icon" href="([^"]+)"`)
	for _, c := range []struct {
		b    *browser
		path string
	}{{anon, "/login"}, {anon, "/login/code"}, {anon, "/device?user_code=BCDF-GHJK"}, {anon, "/claim/promo-unknown"},
		{signedIn, "/console"}, {signedIn, "/console/jobs"}, {signedIn, "/console/templates/new"}} {
		p := c.b.get(c.path)
		m := iconRE.FindStringSubmatch(p.Body)
		if m == nil {
			t.Errorf("%s links no icon", c.path)
			continue
		}
		if got := anon.get(html.UnescapeString(m[1])); got.Status != http.StatusOK || got.Body != ico.Body {
			t.Errorf("%s: icon %s = %d", c.path, m[1], got.Status)
		}
		if csp := p.Header.Get("Content-Security-Policy"); !regexp.MustCompile(`(img-src|default-src) 'self'`).MatchString(csp) {
			t.Errorf("%s: the policy %q does not let the icon load", c.path, csp)
		}
	}
}

// TestDeviceDenyIsNotAnotherApprove checks that Deny is styled apart from Approve (an outlined button
// in the danger colour) by a rule of the stylesheet.
func TestDeviceDenyIsNotAnotherApprove(t *testing.T) {
	e := newEnv(t)
	p := e.browser().get("/device?user_code=BCDF-GHJK")
	approve := regexp.MustCompile(`<button type="submit" name="action" value="approve"([^>]*)>`).FindStringSubmatch(p.Body)
	deny := regexp.MustCompile(`<button type="submit" name="action" value="deny"([^>]*)>`).FindStringSubmatch(p.Body)
	if approve == nil || deny == nil || approve[1] == deny[1] || !strings.Contains(deny[1], `class="secondary danger"`) {
		t.Fatalf("approve %q, deny %q: Deny must look distinct", approve, deny)
	}
	css := e.browser().get(regexp.MustCompile(`href="(/static/style\.css[^"]*)"`).FindStringSubmatch(p.Body)[1])
	if !strings.Contains(css.Body, "button.secondary.danger {") {
		t.Fatalf("the stylesheet has no rule for secondary danger buttons")
	}
}

// regexpSlug is the server's slug rule.
func regexpSlug() *regexp.Regexp { return regexp.MustCompile(models.SlugPattern) }
