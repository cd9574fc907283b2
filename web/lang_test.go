package web_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var (
	langAttrRE = regexp.MustCompile(`<html lang="([^"]+)"`)
	hiddenRE   = regexp.MustCompile(`(?s)<(script|style|code|select|title)\b.*?</(script|style|code|select|title)>|<span class="badge[^"]*">[^<]*</span>`)
	tagRE      = regexp.MustCompile(`<[^>]*>`)
	wordRE     = regexp.MustCompile(`[A-Za-z]{3,}`)
	quotedRE   = regexp.MustCompile(`“([^”]+)”`)
)

// visibleText is the text a page shows, without tags, scripts, code, the choices of select boxes (names
// of templates and tiers) and status badges (the job states are codes).
func visibleText(body string) string {
	return html.UnescapeString(tagRE.ReplaceAllString(hiddenRE.ReplaceAllString(body, " "), " "))
}

// englishWords lists the words of three Latin letters or more in a page's text, less the given names.
func englishWords(body string, names ...string) []string {
	text := visibleText(body)
	for _, n := range append(names, "studio") {
		text = strings.ReplaceAll(text, n, " ")
	}
	return wordRE.FindAllString(text, -1)
}

// TestBuyerPagesSpeakTheBrowsersLanguage signs a buyer in (the login token of a redeemed claim code)
// and reads each of the buyer's pages with Accept-Language zh-CN and en: the lang attribute follows the
// header, a Chinese page shows no English word, an English one its English labels. Tenant pages stay
// English whatever the header. The claim success page quotes the labels the next pages actually show.
func TestBuyerPagesSpeakTheBrowsersLanguage(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme", 5)
	claimer := e.browser()
	_, ok := redeemOnPage(t, e, claimer, "dee@example.com")
	m := loginTokenRE.FindStringSubmatch(ok.Body)
	if m == nil {
		t.Fatalf("no login token on the success page")
	}
	buyer := e.browser()
	buyer.signIn(html.UnescapeString(m[1]))
	tenant := e.browser()
	tenant.signIn(tenantKey)
	anon := e.browser()
	status, start := e.api("POST", "/api/auth/device", "", map[string]any{})
	if status != http.StatusOK {
		t.Fatalf("device start = %d %v", status, start)
	}
	device := "/device?user_code=" + start["user_code"].(string)
	pages := []struct {
		b    *browser
		path string
	}{{buyer, "/console"}, {buyer, "/console/templates"}, {buyer, "/console/jobs"}, {buyer, "/console/jobs?make=template"},
		{buyer, "/console/jobs?make=video"}, {buyer, "/console/jobs?make=copy"}, {buyer, device},
		{anon, "/login"}, {anon, "/login/code"}, {anon, device}}
	shown := map[string]string{} // language -> the text of every page
	for _, accept := range []string{"zh-CN,zh;q=0.9,en;q=0.8", "en-US,en;q=0.9,zh-CN;q=0.5"} {
		want := "zh-CN"
		if strings.HasPrefix(accept, "en") {
			want = "en"
		}
		for _, pg := range pages {
			p := pg.b.do(http.MethodGet, pg.path, nil, "Accept-Language", accept)
			if p.Status != http.StatusOK {
				t.Fatalf("%s (%s) = %d: %s", pg.path, accept, p.Status, excerpt(p.Body))
			}
			if got := langAttrRE.FindStringSubmatch(p.Body); got == nil || got[1] != want {
				t.Errorf("%s with Accept-Language %s: lang %v, want %s", pg.path, accept, got, want)
			}
			words := englishWords(p.Body, "dee@example.com", "Acme", start["user_code"].(string), "BCDF-GHJK", "API")
			if want == "zh-CN" && len(words) > 0 {
				t.Errorf("%s in Chinese still shows English: %v", pg.path, words)
			}
			if want == "en" && len(words) < 3 {
				t.Errorf("%s in English shows %v", pg.path, words)
			}
			shown[want] += visibleText(p.Body) + "\n"
		}
	}
	// Labels quoted by the claim pages, per language of the browser that reads them.
	for _, accept := range []string{"zh-CN,zh;q=0.9", "en-US,en;q=0.9"} {
		want := "zh-CN"
		if strings.HasPrefix(accept, "en") {
			want = "en"
		}
		b := e.browser()
		b.extra = []string{"Accept-Language", accept}
		_, success := redeemOnPage(t, e, b, "q"+strings.ToLower(strings.ReplaceAll(want, "-", ""))+"@example.com")
		steps := success.Body[strings.Index(success.Body, `id="signin-steps"`):]
		steps = steps[:strings.Index(steps, "</ol>")]
		quoted := quotedRE.FindAllStringSubmatch(html.UnescapeString(steps), -1)
		if len(quoted) < 5 {
			t.Fatalf("the sign-in steps quote %d labels: %s", len(quoted), steps)
		}
		for _, q := range quoted {
			if !strings.Contains(shown[want], q[1]) {
				t.Errorf("a %s browser's claim page names “%s”, which its pages do not show", want, q[1])
			}
		}
	}
	// Tenant pages stay English.
	p := tenant.do(http.MethodGet, "/console", nil, "Accept-Language", "zh-CN")
	if got := langAttrRE.FindStringSubmatch(p.Body); got == nil || got[1] != "en" || !strings.Contains(p.Body, "Spendable") {
		t.Errorf("a tenant's dashboard with Accept-Language zh-CN: lang %v", got)
	}
}
