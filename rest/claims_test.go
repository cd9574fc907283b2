package rest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"studio/models"
)

// claimPrompt is the prompt text of the platform templates of these tests: it must never reach strangers.
const claimPrompt = "secret recipe {title}"

// claimTemplates creates platform templates as the administrator: an image, a copy and a video template.
func (e *env) claimTemplates() (image, article, video string) {
	e.t.Helper()
	image = e.tplCreate("/api/templates", e.adminKey, tplImage("gift-poster", claimPrompt))
	article = e.tplCreate("/api/templates", e.adminKey, map[string]any{"type": "article", "slug": "gift-copy", "zh_name": "种草文案",
		"description": "小红书文案", "generation_configs": []any{map[string]any{"format": "xiaohongshu", "prompt_template": claimPrompt,
			"fields": []any{map[string]any{"key": "title", "label": "标题"}}}}})
	video = e.tplCreate("/api/video-templates", e.adminKey, tplVideo("gift-clip", map[string]any{"model": "auto",
		"prompt_template": claimPrompt, "fields": []any{map[string]any{"key": "title", "label": "标题"}}}))
	return image, article, video
}

// claimBearer returns the headers of a personal-login token.
func claimBearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// templateGated reads the gated column of an image or copy template.
func (e *env) templateGated(id string) bool {
	e.t.Helper()
	var t models.Template
	if err := e.app.DB.Gorm.First(&t, "id = ?", id).Error; err != nil {
		e.t.Fatal(err)
	}
	return t.Gated
}

func TestClaimCreateValidation(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 100)
	image, _, _ := e.claimTemplates()
	mine := e.tplCreate("/api/templates", key, tplImage("acme-own", "own {title}"))
	inactive := e.tplCreate("/api/templates", e.adminKey, tplImage("old-poster", "old {title}"))
	e.call("PATCH", "/api/templates", e.adminKey, map[string]any{"id": inactive, "active": false}).expect(t, 200)
	_, personal := e.personalLogin("author@example.com", 0)
	personalTpl := e.tplCreate("/api/templates", personal, tplImage("my-own", "mine {title}"))
	unknown := models.NewID()

	cases := []struct {
		name string
		body any
		want string // a part of the error message
	}{
		{"invalid JSON", `{"template_ids": [`, "invalid JSON"},
		{"not an object", `[1]`, "invalid JSON"},
		{"empty body", ``, "empty"},
		{"template_ids missing", map[string]any{"credits": 5}, "template_ids"},
		{"template_ids empty", map[string]any{"template_ids": []string{}, "credits": 5}, "template_ids"},
		{"template_ids not an array", map[string]any{"template_ids": image, "credits": 5}, "template_ids"},
		{"template id not a string", map[string]any{"template_ids": []any{1}, "credits": 5}, "template_ids"},
		{"template id empty", map[string]any{"template_ids": []string{""}, "credits": 5}, "template_ids[0]"},
		{"unknown template", map[string]any{"template_ids": []string{image, unknown}, "credits": 5}, unknown},
		{"not a uuid", map[string]any{"template_ids": []string{"gift-poster"}, "credits": 5}, "gift-poster"},
		{"tenant's own template", map[string]any{"template_ids": []string{mine}, "credits": 5}, mine},
		{"personal template", map[string]any{"template_ids": []string{personalTpl}, "credits": 5}, personalTpl},
		{"inactive platform template", map[string]any{"template_ids": []string{inactive}, "credits": 5}, inactive},
		{"credits missing", map[string]any{"template_ids": []string{image}}, "credits"},
		{"credits zero", map[string]any{"template_ids": []string{image}, "credits": 0}, "credits"},
		{"credits negative", map[string]any{"template_ids": []string{image}, "credits": -3}, "credits"},
		{"credits fractional", `{"template_ids": ["` + image + `"], "credits": 1.5}`, "credits"},
		{"credits a string", `{"template_ids": ["` + image + `"], "credits": "5"}`, "credits"},
		{"credits null", `{"template_ids": ["` + image + `"], "credits": null}`, "credits"},
		{"tutorial url not http", map[string]any{"template_ids": []string{image}, "credits": 5, "tutorial_pdf_url": "ftp://x/y.pdf"}, "tutorial_pdf_url"},
		{"tutorial url relative", map[string]any{"template_ids": []string{image}, "credits": 5, "tutorial_pdf_url": "/guide.pdf"}, "tutorial_pdf_url"},
		{"tutorial title without url", map[string]any{"template_ids": []string{image}, "credits": 5, "tutorial_pdf_title": "Guide"}, "tutorial_pdf_url"},
		{"note too long", map[string]any{"template_ids": []string{image}, "credits": 5, "note": strings.Repeat("n", 501)}, "note"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/tenant-claims", key, c.body).expect(t, 400)
			if !strings.Contains(r.str("error"), c.want) {
				t.Fatalf("error %q does not name %q", r.str("error"), c.want)
			}
		})
	}
	e.expectPool(t, key, 100, 0)
	if e.templateGated(image) {
		t.Fatal("a refused claim gated a template")
	}

	_, accountKey := e.member(key, map[string]any{})
	valid := map[string]any{"template_ids": []string{image}, "credits": 5}
	for name, cred := range map[string]string{"account key": accountKey, "personal login": personal, "administrator key": e.adminKey} {
		if r := e.call("POST", "/api/tenant-claims", cred, valid); r.Status != 403 || r.str("error") == "" {
			t.Errorf("%s: %d %s, want 403", name, r.Status, r.Body)
		}
	}
	e.call("POST", "/api/tenant-claims", "", valid).expect(t, 401)
	e.expectPool(t, key, 100, 0)
}

func TestClaimCreatePreviewRedeemAndAccess(t *testing.T) {
	e := newEnv(t, withVar("SERVICE_CLAIM_SITE_URL", "https://claim.example.com/"))
	_, key := e.tenant("Acme", 100)
	_, otherKey := e.tenant("Other", 10)
	image, article, video := e.claimTemplates()

	r := e.call("POST", "/api/tenant-claims", key, map[string]any{"template_ids": []string{image, article, video, image},
		"credits": 30, "note": "order 42", "tutorial_pdf_url": "https://cdn.example.com/guide.pdf"}).expect(t, 200)
	code := r.str("code")
	if !regexp.MustCompile(`^promo-[a-z0-9]{20}$`).MatchString(code) {
		t.Fatalf("code %q, want promo- and 20 random characters", code)
	}
	if r.str("claim_url") != "https://claim.example.com/claim/"+code {
		t.Errorf("claim_url = %q", r.str("claim_url"))
	}
	reply := r.str("reply_text")
	for _, want := range []string{r.str("claim_url"), "30", "海报 gift-poster", "种草文案", "视频 gift-clip"} {
		if !strings.Contains(reply, want) {
			t.Errorf("reply_text lacks %q: %s", want, reply)
		}
	}
	if !strings.HasPrefix(r.str("product_copy"), "由「Acme」提供") {
		t.Errorf("product_copy = %q, want the provided-by line first", r.str("product_copy"))
	}
	if imgs := r.JSON["product_images"].([]any); len(imgs) != 2 || imgs[0] != "https://cdn.example.com/gift-poster.png" ||
		imgs[1] != "https://cdn.example.com/gift-clip.jpg" {
		t.Errorf("product_images = %v", imgs)
	}
	if tpls := r.JSON["templates"].([]any); len(tpls) != 3 || tpls[0].(map[string]any)["slug"] != "gift-poster" {
		t.Errorf("templates = %v", tpls)
	}
	if pdf := r.JSON["tutorial_pdf"].(map[string]any); pdf["title"] != models.DefaultTutorialTitle {
		t.Errorf("tutorial_pdf = %v", pdf)
	}
	if r.num("credits") != 30 || r.num("credits_balance_after") != 70 {
		t.Errorf("credits %v, balance after %v", r.num("credits"), r.num("credits_balance_after"))
	}
	if strings.Contains(string(r.Body), "secret recipe") {
		t.Error("the create answer shows prompt text")
	}
	e.expectPool(t, key, 70, 0)
	var entry models.LedgerEntry
	if err := e.app.DB.Gorm.First(&entry, "kind = ? AND ref = ?", models.LedgerClaim, code).Error; err != nil || entry.Delta != -30 {
		t.Fatalf("claim ledger row = %+v %v", entry, err)
	}

	// Gated: strangers see the templates locked and without prompts; the issuing tenant keeps them.
	_, stranger := e.personalLogin("stranger@example.com", 0)
	for who, cred := range map[string]string{"other tenant": otherKey, "stranger": stranger} {
		for _, path := range []string{"/api/templates", "/api/video-templates"} {
			res := e.call("GET", path, cred, nil).expect(t, 200)
			if strings.Contains(string(res.Body), "secret recipe") {
				t.Errorf("%s sees a gated prompt in %s", who, path)
			}
			for _, row := range res.JSON["templates"].([]any) {
				if m := row.(map[string]any); strings.HasPrefix(m["slug"].(string), "gift-") && (m["locked"] != true || m["gated"] != true) {
					t.Errorf("%s: %s row locked %v gated %v, want locked", who, m["slug"], m["locked"], m["gated"])
				}
			}
		}
	}
	if rows := e.tplRows("/api/templates", key); rows["gift-poster"]["locked"] != false {
		t.Errorf("issuing tenant sees its claimed template locked: %v", rows["gift-poster"])
	}

	// Public preview: the benefit list, no prompt text.
	p := e.call("GET", "/api/promo-claims?code="+code, "", nil).expect(t, 200)
	if p.JSON["claimable"] != true || p.str("status") != "active" || p.str("provided_by") != "Acme" || p.num("credits") != 30 {
		t.Fatalf("preview = %s", p.Body)
	}
	if tpls := p.JSON["templates"].([]any); len(tpls) != 3 {
		t.Fatalf("preview templates = %v", tpls)
	}
	if strings.Contains(string(p.Body), "secret recipe") || strings.Contains(string(p.Body), "prompt") {
		t.Fatal("the preview shows prompt text")
	}
	e.call("GET", "/api/promo-claims?code=promo-unknowncode23456789ab", "", nil).expect(t, 404)
	e.call("GET", "/api/promo-claims?code=nonsense", "", nil).expect(t, 404)
	e.call("GET", "/api/promo-claims", "", nil).expect(t, 400)

	// Redemption validation changes nothing.
	for name, body := range map[string]any{
		"bad email":      map[string]any{"code": code, "nickname": "Bo", "email": "not-an-email"},
		"missing email":  map[string]any{"code": code, "nickname": "Bo"},
		"empty nickname": map[string]any{"code": code, "nickname": "  ", "email": "bo@example.com"},
		"long nickname":  map[string]any{"code": code, "nickname": strings.Repeat("名", 51), "email": "bo@example.com"},
		"missing code":   map[string]any{"nickname": "Bo", "email": "bo@example.com"},
		"invalid JSON":   `{"code":`,
	} {
		if res := e.call("POST", "/api/promo-claims", "", body); res.Status != 400 {
			t.Errorf("%s: %d %s, want 400", name, res.Status, res.Body)
		}
	}
	e.call("POST", "/api/promo-claims", "", map[string]any{"code": "promo-unknowncode23456789ab", "nickname": "Bo", "email": "bo@example.com"}).expect(t, 404)

	// Redeem: an account, the credits, the templates and a 24-hour login.
	red := e.call("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "Bo", "email": "Bo@Example.com"}).expect(t, 200)
	token := red.str("token")
	exp, err := time.Parse(time.RFC3339, red.str("token_expires_at"))
	if token == "" || err != nil || time.Until(exp) > 24*time.Hour+time.Minute || time.Until(exp) < 23*time.Hour {
		t.Fatalf("redeem = %s", red.Body)
	}
	if red.num("credits") != 30 || len(red.JSON["templates"].([]any)) != 3 || red.str("login_hint") == "" {
		t.Fatalf("redeem = %s", red.Body)
	}
	if b := e.callH("GET", "/api/balance", claimBearer(token), nil).expect(t, 200); b.num("credits") != 30 {
		t.Fatalf("buyer balance = %s", b.Body)
	}
	claims := e.callH("GET", "/api/claims", claimBearer(token), nil).expect(t, 200)
	if tpls := claims.JSON["templates"].([]any); len(tpls) != 2 {
		t.Fatalf("claimed templates = %v", tpls)
	}
	for _, row := range claims.JSON["templates"].([]any) {
		m := row.(map[string]any)
		cfg := m["generation_configs"].([]any)[0].(map[string]any)
		if m["locked"] != false || cfg["prompt_template"] != claimPrompt {
			t.Errorf("claimed %s: locked %v prompt %v", m["slug"], m["locked"], cfg["prompt_template"])
		}
	}
	if vids := claims.JSON["video_templates"].([]any); len(vids) != 1 || vids[0].(map[string]any)["locked"] != false {
		t.Fatalf("claimed video templates = %v", vids)
	}
	if codes := claims.JSON["codes"].([]any); len(codes) != 1 || codes[0].(map[string]any)["code"] != code ||
		codes[0].(map[string]any)["provided_by"] != "Acme" {
		t.Fatalf("claimed codes = %v", codes)
	}
	rows := map[string]map[string]any{}
	for _, row := range e.callH("GET", "/api/templates", claimBearer(token), nil).expect(t, 200).JSON["templates"].([]any) {
		m := row.(map[string]any)
		rows[m["slug"].(string)] = m
	}
	if cfg := rows["gift-poster"]["generation_configs"].([]any)[0].(map[string]any); rows["gift-poster"]["locked"] != false || cfg["prompt_template"] != claimPrompt {
		t.Fatalf("buyer's template listing: %v", rows["gift-poster"])
	}
	for who, cred := range map[string]string{"tenant key": key, "administrator key": e.adminKey} {
		if res := e.call("GET", "/api/claims", cred, nil); res.Status != 403 {
			t.Errorf("GET /api/claims with the %s: %d, want 403", who, res.Status)
		}
	}
	e.call("GET", "/api/claims", "", nil).expect(t, 401)

	// Again with the same e-mail: the same result, nothing granted twice. Another e-mail: 409.
	again := e.call("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "Bob", "email": "bo@example.com"}).expect(t, 200)
	// No token again (D8): only the redemption that created the account gives one.
	if again.num("credits") != 30 || len(again.JSON["templates"].([]any)) != 3 || again.JSON["token"] != nil || again.JSON["sign_in_required"] != true {
		t.Fatalf("same e-mail again = %s", again.Body)
	}
	if b := e.callH("GET", "/api/balance", claimBearer(red.str("token")), nil).expect(t, 200); b.num("credits") != 30 {
		t.Fatalf("credits after the same e-mail again = %s, want 30", b.Body)
	}
	e.call("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "Eve", "email": "eve@example.com"}).expect(t, 409)
	if p := e.call("GET", "/api/promo-claims?code="+code, "", nil).expect(t, 200); p.JSON["claimable"] != false || p.str("status") != "used" {
		t.Fatalf("preview of a used code = %s", p.Body)
	}
	var grants int64
	e.app.DB.Gorm.Model(&models.LedgerEntry{}).Where("kind = ? AND ref = ?", models.LedgerGrant, code).Count(&grants)
	if grants != 1 {
		t.Fatalf("grant ledger rows = %d, want 1", grants)
	}
}

func TestClaimInsufficientCreditsIs409(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 20)
	image, _, _ := e.claimTemplates()
	r := e.call("POST", "/api/tenant-claims", key, map[string]any{"template_ids": []string{image}, "credits": 25}).expect(t, 409)
	if msg := r.str("error"); !strings.Contains(msg, "need 25") || !strings.Contains(msg, "have 20") {
		t.Fatalf("error %q, want need and have", msg)
	}
	e.expectPool(t, key, 20, 0)
	if e.templateGated(image) {
		t.Fatal("a refused claim gated the template")
	}
}

func TestClaimUnmeteredTenantIsRecordedNotDeducted(t *testing.T) {
	e := newEnv(t)
	r := e.admin(map[string]any{"action": "tenant-create", "name": "Big", "unmetered": true})
	key := r.str("api_key")
	image, _, _ := e.claimTemplates()
	c := e.call("POST", "/api/tenant-claims", key, map[string]any{"template_ids": []string{image}, "credits": 1000}).expect(t, 200)
	if c.num("credits_balance_after") != 0 || c.JSON["tutorial_pdf"] != nil {
		t.Fatalf("unmetered create = %s", c.Body)
	}
	var n int64
	e.app.DB.Gorm.Model(&models.LedgerEntry{}).Where("kind = ? AND ref = ? AND delta = 0", models.LedgerClaim, c.str("code")).Count(&n)
	if n != 1 {
		t.Fatalf("unmetered claim ledger rows = %d, want 1", n)
	}
}

// failClaimStores makes every insert into claim_codes fail inside the database, as a broken store would.
func (e *env) failClaimStores() {
	e.t.Helper()
	stmts := []string{`CREATE TRIGGER claim_store_fails BEFORE INSERT ON claim_codes BEGIN SELECT RAISE(ABORT, 'injected store failure'); END`}
	if e.app.DB.Dialect == models.Postgres {
		stmts = []string{
			`CREATE FUNCTION claim_store_fails() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected store failure'; END $$`,
			`CREATE TRIGGER claim_store_fails BEFORE INSERT ON claim_codes FOR EACH ROW EXECUTE FUNCTION claim_store_fails()`,
		}
	}
	for _, s := range stmts {
		if err := e.app.DB.Gorm.Exec(s).Error; err != nil {
			e.t.Fatalf("install failing trigger: %v", err)
		}
	}
}

func TestClaimStoreFailureRollsBackCreditsAndGating(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 50)
	image, _, video := e.claimTemplates()
	e.failClaimStores()

	// The harness reports any 5xx as a failure, so this one call goes around it.
	body, _ := json.Marshal(map[string]any{"template_ids": []string{image, video}, "credits": 30})
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/tenant-claims", bytes.NewReader(body))
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if res.StatusCode != 500 || out["error"] == "" || strings.Contains(out["error"].(string), "injected") {
		t.Fatalf("store failure = %d %v, want 500 with a generic message", res.StatusCode, out)
	}

	e.expectPool(t, key, 50, 0)
	var vt models.VideoTemplate
	e.app.DB.Gorm.First(&vt, "id = ?", video)
	if e.templateGated(image) || vt.Gated {
		t.Fatal("templates stay gated after a failed store")
	}
	var n int64
	e.app.DB.Gorm.Model(&models.LedgerEntry{}).Where("kind = ?", models.LedgerClaim).Count(&n)
	if n != 0 {
		t.Fatalf("claim ledger rows after a failed store = %d, want 0", n)
	}
}

func TestClaimDisabledByAdministrator(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 50)
	image, _, _ := e.claimTemplates()
	code := e.call("POST", "/api/tenant-claims", key, map[string]any{"template_ids": []string{image}, "credits": 5}).expect(t, 200).str("code")

	e.call("POST", "/api/admin", key, map[string]any{"action": "promo-claim-disable", "code": code}).expect(t, 403)
	e.call("POST", "/api/admin", e.adminKey, map[string]any{"action": "promo-claim-disable", "code": "promo-nosuchcode234567892"}).expect(t, 404)
	e.call("POST", "/api/admin", e.adminKey, map[string]any{"action": "promo-claim-disable"}).expect(t, 400)
	if r := e.admin(map[string]any{"action": "promo-claim-disable", "code": code}); r.JSON["ok"] != true {
		t.Fatalf("disable = %s", r.Body)
	}

	p := e.call("GET", "/api/promo-claims?code="+code, "", nil).expect(t, 200)
	if p.JSON["claimable"] != false || p.str("status") != "disabled" {
		t.Fatalf("preview of a disabled code = %s", p.Body)
	}
	r := e.call("POST", "/api/promo-claims", "", map[string]any{"code": code, "nickname": "Bo", "email": "bo@example.com"}).expect(t, 409)
	if !strings.Contains(r.str("error"), "disabled") {
		t.Fatalf("redeem disabled: %s", r.Body)
	}
	var users int64
	e.app.DB.Gorm.Model(&models.User{}).Count(&users)
	if users != 0 {
		t.Fatalf("a refused redemption created %d accounts", users)
	}
}

func TestClaimPublicEndpointsAreRateLimited(t *testing.T) {
	e := newEnv(t)
	for i := range models.ClaimPreviewsPerAddress {
		if r := e.call("GET", "/api/promo-claims?code=promo-guess"+strings.Repeat("a", i%5+1), "", nil); r.Status != 404 {
			t.Fatalf("preview %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	r := e.call("GET", "/api/promo-claims?code=promo-guess", "", nil).expect(t, 429)
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("429 without Retry-After: %v", r.Header)
	}
	guess := map[string]any{"code": "promo-guessguessguess", "nickname": "G", "email": "g@example.com"}
	for i := range models.ClaimRedeemsPerAddress {
		if r := e.call("POST", "/api/promo-claims", "", guess); r.Status != 404 {
			t.Fatalf("redeem %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	r = e.call("POST", "/api/promo-claims", "", guess).expect(t, 429)
	if r.Header.Get("Retry-After") == "" || !strings.Contains(r.str("error"), "per hour from one address") {
		t.Fatalf("429 without Retry-After or reason: %v %s", r.Header, r.Body)
	}

	// The counts are hourly: an hour later the address may call again.
	later := time.Now().Add(time.Hour)
	e.app.Now = func() time.Time { return later }
	e.call("GET", "/api/promo-claims?code=promo-guess", "", nil).expect(t, 404)
	e.call("POST", "/api/promo-claims", "", guess).expect(t, 404)
}
