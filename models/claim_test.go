package models_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"studio/models"
	"studio/models/modelstest"
)

// platformTemplate creates an active platform image template (as the administrator) and returns its id.
func platformTemplate(t *testing.T, app *models.App, slug string) string {
	t.Helper()
	admin := &models.Identity{Kind: models.IdentityAdmin}
	v, err := app.Templates().CreateTemplate(context.Background(), admin, models.TemplateInput{Type: models.TemplateImage, Slug: slug,
		ZhName: "海报 " + slug, SampleImages: []string{"https://cdn.example.com/" + slug + ".png"},
		GenerationConfigs: json.RawMessage(`[{"model":"auto","prompt_template":"secret {title}","fields":[{"key":"title","label":"标题"}]}]`)})
	if err != nil {
		t.Fatalf("create platform template: %v", err)
	}
	return v.ID
}

// newClaim creates a claim code of credits over the templates.
func newClaim(t *testing.T, app *models.App, tenant *models.Identity, credits int64, ids ...string) *models.ClaimCreated {
	t.Helper()
	c, err := app.Claims().CreateClaimCode(context.Background(), tenant, models.ClaimInput{TemplateIDs: ids, Credits: ptr(credits)})
	if err != nil {
		t.Fatalf("create claim code: %v", err)
	}
	return c
}

// claimLedgerRows counts the ledger rows of a kind with a reference.
func claimLedgerRows(t *testing.T, app *models.App, kind, ref string) int64 {
	t.Helper()
	var n int64
	if err := app.DB.Gorm.Model(&models.LedgerEntry{}).Where("kind = ? AND ref = ?", kind, ref).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// claimAuditClean fails the test unless every balance equals the sum of its ledger rows.
func claimAuditClean(t *testing.T, app *models.App) {
	t.Helper()
	bad, err := app.Credits().AuditLedger(context.Background())
	if err != nil || len(bad) > 0 {
		t.Fatalf("ledger audit: %v %v", bad, err)
	}
}

func TestClaimCreateDeductsGatesAndRecords(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Name: "Acme", Credits: ptr[int64](100)})
	id := platformTemplate(t, app, "poster")
	c := newClaim(t, app, tenant, 30, id, id)
	if !strings.HasPrefix(c.Code, models.ClaimCodePrefix) || len(c.Code) != len(models.ClaimCodePrefix)+20 {
		t.Fatalf("code = %q, want promo- and 20 characters", c.Code)
	}
	if c.CreditsBalanceAfter != 70 || len(c.Templates) != 1 || !strings.HasPrefix(c.ProductCopy, "由「Acme」提供") {
		t.Fatalf("created = %+v", c)
	}
	ten, _ := app.Accounts().TenantSettings(context.Background(), tenant)
	if ten.Spendable != 70 {
		t.Fatalf("spendable = %d, want 70", ten.Spendable)
	}
	var tpl models.Template
	app.DB.Gorm.First(&tpl, "id = ?", id)
	if !tpl.Gated {
		t.Fatal("bundled template is not gated")
	}
	if n := claimLedgerRows(t, app, models.LedgerClaim, c.Code); n != 1 {
		t.Fatalf("claim ledger rows = %d, want 1", n)
	}
	claimAuditClean(t, app)
}

func TestClaimCreateUnmeteredRecordsWithoutDeducting(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Unmetered: true})
	c := newClaim(t, app, tenant, 500, platformTemplate(t, app, "poster"))
	var row models.LedgerEntry
	if err := app.DB.Gorm.First(&row, "kind = ? AND ref = ?", models.LedgerClaim, c.Code).Error; err != nil {
		t.Fatalf("no claim ledger row for an unmetered tenant: %v", err)
	}
	if row.Delta != 0 || c.CreditsBalanceAfter != 0 {
		t.Fatalf("unmetered claim deducted: delta %d, balance after %d", row.Delta, c.CreditsBalanceAfter)
	}
	claimAuditClean(t, app)
}

func TestClaimCreateInsufficientChangesNothing(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](10)})
	id := platformTemplate(t, app, "poster")
	_, err := app.Claims().CreateClaimCode(context.Background(), tenant, models.ClaimInput{TemplateIDs: []string{id}, Credits: ptr[int64](11)})
	if models.KindOf(err) != models.KindConflict || !strings.Contains(err.Error(), "need 11, have 10") {
		t.Fatalf("err = %v, want conflict with need 11, have 10", err)
	}
	var tpl models.Template
	app.DB.Gorm.First(&tpl, "id = ?", id)
	ten, _ := app.Accounts().TenantSettings(context.Background(), tenant)
	if tpl.Gated || ten.Spendable != 10 {
		t.Fatalf("after refusal: gated %v, spendable %d", tpl.Gated, ten.Spendable)
	}
}

// redeemRace redeems one code n times at once with n different e-mails and checks that exactly one
// succeeds, the others are refused with a conflict, and the credits are granted exactly once.
func redeemRace(t *testing.T, n int) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](100)})
	tplID := platformTemplate(t, app, "poster")
	c := newClaim(t, app, tenant, 25, tplID)
	claimWarmPool(app, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = app.Claims().RedeemClaim(context.Background(), models.RedeemInput{Code: c.Code, Nickname: "buyer",
				Email: fmt.Sprintf("buyer%d@example.com", i)}, fmt.Sprintf("192.0.2.%d", i+1))
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case models.KindOf(err) != models.KindConflict:
			t.Errorf("redemption %d: %v, want a conflict", i, err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d redemptions succeeded, want exactly 1", ok)
	}
	if rows := claimLedgerRows(t, app, models.LedgerGrant, c.Code); rows != 1 {
		t.Fatalf("grant ledger rows = %d, want 1", rows)
	}
	var users []models.User
	app.DB.Gorm.Find(&users)
	if len(users) != 1 || users[0].Credits != 25 {
		t.Fatalf("users = %+v, want one holding 25 credits", users)
	}
	var grants, redemptions int64
	app.DB.Gorm.Model(&models.TemplateGrant{}).Count(&grants)
	app.DB.Gorm.Model(&models.ClaimRedemption{}).Count(&redemptions)
	if grants != 1 || redemptions != 1 {
		t.Fatalf("grants %d, redemptions %d, want 1 and 1", grants, redemptions)
	}
	claimAuditClean(t, app)
}

// claimWarmPool opens up to n PostgreSQL connections at once, so that racing transactions really overlap
// instead of queueing behind connection set-up. SQLite has one connection and runs them one by one.
func claimWarmPool(app *models.App, n int) {
	if app.DB.Dialect != models.Postgres {
		return
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { app.DB.Gorm.Exec("SELECT pg_sleep(0.05)") })
	}
	wg.Wait()
}

func TestClaimRedeemRacePostgres(t *testing.T) {
	modelstest.RequirePostgres(t)
	redeemRace(t, 50)
}

func TestClaimRedeemRace(t *testing.T) { redeemRace(t, 8) }

func TestClaimRedeemSameEmailConcurrentlyGrantsOnce(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](100)})
	c := newClaim(t, app, tenant, 7, platformTemplate(t, app, "poster"))
	const n = 8
	claimWarmPool(app, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = app.Claims().RedeemClaim(context.Background(), models.RedeemInput{Code: c.Code, Nickname: "b", Email: "Same@Example.com"}, "192.0.2.1")
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("redemption %d by the same e-mail: %v", i, err)
		}
	}
	u, err := app.Accounts().UserByEmail(context.Background(), "same@example.com")
	if err != nil || u.Credits != 7 {
		t.Fatalf("user = %+v %v, want 7 credits", u, err)
	}
	if rows := claimLedgerRows(t, app, models.LedgerGrant, c.Code); rows != 1 {
		t.Fatalf("grant ledger rows = %d, want 1", rows)
	}
	claimAuditClean(t, app)
}

func TestClaimRedeemReusesAccountAndRefusesDisabled(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](100)})
	id := platformTemplate(t, app, "poster")
	existing := newUser(t, app, 5)
	var u models.User
	app.DB.Gorm.First(&u, "id = ?", existing.UserID)

	first := newClaim(t, app, tenant, 10, id)
	if _, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: first.Code, Nickname: "new name", Email: u.Email}, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	var after models.User
	app.DB.Gorm.First(&after, "id = ?", u.ID)
	if after.Credits != 15 || after.Nickname != u.Nickname {
		t.Fatalf("existing account after redeem: credits %d nickname %q, want 15 and unchanged", after.Credits, after.Nickname)
	}

	second := newClaim(t, app, tenant, 10, id)
	if err := app.Claims().DisableClaimCode(ctx, second.Code); err != nil {
		t.Fatal(err)
	}
	_, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: second.Code, Nickname: "x", Email: "x@example.com"}, "192.0.2.1")
	if models.KindOf(err) != models.KindConflict {
		t.Fatalf("redeem disabled code: %v, want conflict", err)
	}
	if err := app.Claims().DisableClaimCode(ctx, "promo-doesnotexist2345678"); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("disable unknown: %v, want not found", err)
	}
	p, err := app.Claims().PreviewClaim(ctx, second.Code, "192.0.2.1")
	if err != nil || p.Status != models.ClaimDisabled || p.Claimable {
		t.Fatalf("preview disabled = %+v %v", p, err)
	}
}

func TestClaimUserClaimsShowsPrompts(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](100)})
	c := newClaim(t, app, tenant, 3, platformTemplate(t, app, "poster"))
	if _, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: c.Code, Nickname: "b", Email: "b@example.com"}, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	u, _ := app.Accounts().UserByEmail(ctx, "b@example.com")
	got, err := app.Claims().UserClaims(ctx, &models.Identity{Kind: models.IdentityUser, UserID: u.ID})
	if err != nil || len(got.Templates) != 1 || len(got.Codes) != 1 || got.Codes[0].ProvidedBy != "Acme" {
		t.Fatalf("claims = %+v %v", got, err)
	}
	cfgs := got.Templates[0].GenerationConfigs.([]models.ImageConfigView)
	if got.Templates[0].Locked || cfgs[0].PromptTemplate == nil || *cfgs[0].PromptTemplate != "secret {title}" {
		t.Fatalf("claimed template as the buyer sees it: locked %v, configs %+v", got.Templates[0].Locked, cfgs)
	}
}

func TestClaimBuyerSetsAFirstPassword(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](100)})
	code := newClaim(t, app, tenant, 10, platformTemplate(t, app, "poster"))
	red, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: code.Code, Nickname: "Bo", Email: "Bo@Example.com"}, "192.0.2.1")
	if err != nil || red.Token == nil || red.TokenExpiresAt == nil || red.SignInRequired {
		t.Fatalf("redeem for a new account: %v, %+v: want a token", err, red)
	}
	token := *red.Token
	if _, err := app.Auth().Authenticate(ctx, "bo@example.com", "long enough", "192.0.2.1"); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("a buyer without a password signed in: %v", err)
	}
	// A repeated redemption gives no token: only the first answer carries one (D8).
	again, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: code.Code, Nickname: "Bo", Email: "bo@example.com"}, "192.0.2.1")
	if err != nil || again.Token != nil || again.TokenExpiresAt != nil || !again.SignInRequired {
		t.Fatalf("redeem again: %v, %+v: want no token and sign_in_required", err, again)
	}
	for _, bad := range []string{"short", strings.Repeat("长", 25)} { // 7 characters; 25 characters of 75 bytes
		if _, err := app.Auth().SetFirstPassword(ctx, token, bad); models.KindOf(err) != models.KindInvalid {
			t.Fatalf("password %q: %v, want invalid", bad, err)
		}
	}
	if _, err := app.Auth().SetFirstPassword(ctx, "not a token", "long enough"); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("a wrong token: %v, want unauthenticated", err)
	}
	u, err := app.Auth().SetFirstPassword(ctx, token, "long enough")
	if err != nil || u.Email != "bo@example.com" {
		t.Fatalf("first password: %v %+v", err, u)
	}
	if got, err := app.Auth().Authenticate(ctx, "bo@example.com", "long enough", "192.0.2.1"); err != nil || got.ID != u.ID {
		t.Fatalf("sign-in with the new password: %v", err)
	}
	// Setting the password ended the token: it neither signs in nor sets another password.
	if _, err := app.Auth().ResolveIdentity(ctx, token); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("the redemption's token after the first password: %v, want unauthenticated", err)
	}
	if _, err := app.Auth().SetFirstPassword(ctx, token, "another password"); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("second first password: %v, want unauthenticated", err)
	}
	if _, err := app.Auth().Authenticate(ctx, "bo@example.com", "long enough", "192.0.2.1"); err != nil {
		t.Fatalf("the first password no longer works: %v", err)
	}
}

func TestClaimForAnExistingAccountSignsNobodyIn(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](100)})
	victim := newUser(t, app, 5)
	var u models.User
	app.DB.Gorm.First(&u, "id = ?", victim.UserID)
	code := newClaim(t, app, tenant, 1, platformTemplate(t, app, "poster"))
	red, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: code.Code, Nickname: "attacker", Email: u.Email}, "192.0.2.1")
	if err != nil || red.Token != nil || red.TokenExpiresAt != nil || !red.SignInRequired || red.Credits != 1 {
		t.Fatalf("redeem for an existing account: %v, %+v: want the grant, no token, sign_in_required", err, red)
	}
	var after models.User
	app.DB.Gorm.First(&after, "id = ?", u.ID)
	if after.Credits != 6 || after.PasswordHash != u.PasswordHash || after.TokenVersion != u.TokenVersion {
		t.Fatalf("existing account after redeem: credits %d, password or logins changed %v", after.Credits,
			after.PasswordHash != u.PasswordHash || after.TokenVersion != u.TokenVersion)
	}
}
