package models_test

import (
	"context"
	"testing"
	"time"

	"studio/models"
)

func TestKeySessionFollowsItsKey(t *testing.T) {
	ctx := context.Background()
	app := newApp(t)
	ten, key, err := app.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	cookie, err := app.Auth().StartKeySession(ctx, key, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := app.Auth().ResolveSession(ctx, cookie)
	if err != nil || s.Identity.Kind != models.IdentityTenant || s.Identity.TenantID != ten.ID || s.Label != "Acme" || s.CSRF == "" {
		t.Fatalf("session = %+v, %v", s, err)
	}
	if _, err := app.Auth().StartKeySession(ctx, models.NewAPIKey(), "127.0.0.1"); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("unknown key: %v, want unauthenticated", err)
	}
	start := time.Now().UTC()
	app.Now = func() time.Time { return start.Add(models.SessionTTL + time.Second) }
	if _, err := app.Auth().ResolveSession(ctx, cookie); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("expired session: %v, want unauthenticated", err)
	}
	app.Now = func() time.Time { return time.Now().UTC() }
	if _, err := app.Accounts().RekeyTenant(ctx, ten.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Auth().ResolveSession(ctx, cookie); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("session of a rekeyed key: %v, want unauthenticated", err)
	}
}

func TestCapabilitiesFollowTheSpecTable(t *testing.T) {
	tenant := &models.Identity{Kind: models.IdentityTenant}
	account := &models.Identity{Kind: models.IdentityAccount}
	user := &models.Identity{Kind: models.IdentityUser}
	admin := &models.Identity{Kind: models.IdentityAdmin}
	cases := []struct {
		cap  models.Capability
		want map[*models.Identity]bool
	}{
		{models.CapGenerate, map[*models.Identity]bool{tenant: true, account: true, user: true, admin: false}},
		{models.CapWriteTemplates, map[*models.Identity]bool{tenant: true, account: false, user: true, admin: true}},
		{models.CapManageMembers, map[*models.Identity]bool{tenant: true, account: false, user: false, admin: false}},
		{models.CapTenantReports, map[*models.Identity]bool{tenant: true, account: false, user: false, admin: false}},
		{models.CapAdminister, map[*models.Identity]bool{tenant: false, account: false, user: false, admin: true}},
	}
	for _, c := range cases {
		for id, want := range c.want {
			if got := id.May(c.cap); got != want {
				t.Errorf("%s may %s = %v, want %v", id.Kind, c.cap, got, want)
			}
			if err := id.Require(c.cap); (err == nil) != want || (err != nil && models.KindOf(err) != models.KindForbidden) {
				t.Errorf("%s require %s = %v", id.Kind, c.cap, err)
			}
		}
	}
}

func TestClaimCodesAreListedToTheirTenantAndTheAdministrator(t *testing.T) {
	ctx := context.Background()
	app := newApp(t)
	acme := newTenant(t, app, models.TenantInput{Name: "Acme", Credits: ptr[int64](50)})
	globex := newTenant(t, app, models.TenantInput{Name: "Globex", Credits: ptr[int64](50)})
	tpl := platformTemplate(t, app, "poster")
	mine := newClaim(t, app, acme, 5, tpl)
	newClaim(t, app, globex, 6, tpl)
	if _, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: mine.Code, Nickname: "bo", Email: "bo@example.com"}, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	list, err := app.Claims().ClaimCodesFor(ctx, acme)
	if err != nil || len(list) != 1 {
		t.Fatalf("tenant list = %+v, %v", list, err)
	}
	c := list[0]
	if c.Code != mine.Code || c.Status != models.ClaimUsed || c.ReplyText != mine.ReplyText || c.RedeemedEmail != "" ||
		c.TenantName != "Acme" || len(c.Templates) != 1 || c.RedeemedAt == nil {
		t.Fatalf("tenant's view of its code = %+v (reply text %q)", c, mine.ReplyText)
	}
	all, err := app.Claims().ClaimCodesFor(ctx, &models.Identity{Kind: models.IdentityAdmin})
	if err != nil || len(all) != 2 {
		t.Fatalf("administrator list = %d codes, %v", len(all), err)
	}
	for _, c := range all {
		if c.Code == mine.Code && c.RedeemedEmail != "bo@example.com" {
			t.Fatalf("the administrator does not see who redeemed: %+v", c)
		}
	}
	member := newMember(t, app, acme, models.AccountInput{})
	if _, err := app.Claims().ClaimCodesFor(ctx, member); models.KindOf(err) != models.KindForbidden {
		t.Fatalf("member list: %v, want forbidden", err)
	}
}

func TestTemplatePromptPreviewFollowsVisibility(t *testing.T) {
	ctx := context.Background()
	app := newApp(t)
	acme := newTenant(t, app, models.TenantInput{Name: "Acme", Credits: ptr[int64](50)})
	globex := newTenant(t, app, models.TenantInput{Name: "Globex"})
	tpl := platformTemplate(t, app, "poster")
	got, err := app.Templates().TemplatePromptPreview(ctx, globex, tpl, map[string]any{"title": "Spring"})
	if err != nil || got != "secret Spring" {
		t.Fatalf("preview = %q, %v", got, err)
	}
	if _, err := app.Templates().TemplatePromptPreview(ctx, globex, tpl, map[string]any{}); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("missing field: %v, want invalid", err)
	}
	newClaim(t, app, acme, 5, tpl) // gates the template
	if _, err := app.Templates().TemplatePromptPreview(ctx, globex, tpl, map[string]any{"title": "x"}); models.KindOf(err) != models.KindForbidden {
		t.Fatalf("gated template for another tenant: %v, want forbidden", err)
	}
	if got, err := app.Templates().TemplatePromptPreview(ctx, acme, tpl, map[string]any{"title": "x"}); err != nil || got != "secret x" {
		t.Fatalf("gated template for its claim's tenant = %q, %v", got, err)
	}
	if _, err := app.Templates().TemplatePromptPreview(ctx, acme, models.NewID(), nil); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("unknown template: %v, want not found", err)
	}
}
