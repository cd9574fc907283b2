package models_test

import (
	"context"
	"testing"

	"studio/models"
)

func TestCreateAccountValidates(t *testing.T) {
	app := newApp(t)
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(10))})
	cases := []struct {
		name string
		in   models.AccountInput
		kind models.Kind
		msg  string
	}{
		{"no email", models.AccountInput{}, models.KindInvalid, ""},
		{"bad email", models.AccountInput{Email: "not-an-email"}, models.KindInvalid, ""},
		{"display name", models.AccountInput{Email: "Bob <bob@example.com>"}, models.KindInvalid, ""},
		{"no domain dot", models.AccountInput{Email: "bob@localhost"}, models.KindInvalid, ""},
		{"negative credits", models.AccountInput{Email: "a@example.com", Credits: ptr(int64(-1))}, models.KindInvalid, ""},
		{"shared with credits", models.AccountInput{Email: "a@example.com", Shared: ptr(true), Credits: ptr(int64(1))}, models.KindInvalid, ""},
		{"above spendable", models.AccountInput{Email: "a@example.com", Credits: ptr(int64(11))}, models.KindInvalid, models.InsufficientAllocatableMessage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := app.Accounts().CreateAccount(context.Background(), tenant, c.in)
			if models.KindOf(err) != c.kind || (c.msg != "" && err.Error() != c.msg) {
				t.Fatalf("got %v, want kind %s %q", err, c.kind, c.msg)
			}
		})
	}
	var n int64
	app.DB.Gorm.Model(&models.Account{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d accounts after refused creations", n)
	}
	if p := pool(t, app, tenant); p.Spendable != 10 || p.Reserved != 0 {
		t.Fatalf("pool moved by refused creations: %d/%d", p.Spendable, p.Reserved)
	}
}

func TestCreateAccountModesAndKeys(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr(int64(10))})
	cases := []struct {
		name    string
		in      models.AccountInput
		shared  bool
		credits int64
	}{
		{"default is shared", models.AccountInput{Email: " Ann@Example.com "}, true, 0},
		{"credits mean dedicated", models.AccountInput{Email: "b@example.com", Credits: ptr(int64(4))}, false, 4},
		{"shared false without credits", models.AccountInput{Email: "c@example.com", Shared: ptr(false)}, false, 0},
		{"shared true", models.AccountInput{Email: "d@example.com", Shared: ptr(true), Nickname: "Dee"}, true, 0},
	}
	for _, c := range cases {
		v, err := app.Accounts().CreateAccount(ctx, tenant, c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if v.Shared != c.shared || v.Credits != c.credits || v.APIKey == nil || !models.ValidKeyFormat(*v.APIKey) {
			t.Errorf("%s: %+v", c.name, v)
		}
		id, err := app.Auth().ResolveIdentity(ctx, *v.APIKey)
		if err != nil || id.Kind != models.IdentityAccount || id.AccountID != v.ID || id.TenantID != tenant.TenantID {
			t.Errorf("%s: key resolves to %+v, %v", c.name, id, err)
		}
	}
	list, err := app.Accounts().Accounts(ctx, tenant)
	if err != nil || len(list) != 4 {
		t.Fatalf("list = %d, %v", len(list), err)
	}
	if list[0].Email != "ann@example.com" || list[0].Nickname != "ann" || list[3].Nickname != "Dee" {
		t.Errorf("normalised e-mail and default nickname: %+v / %+v", list[0], list[3])
	}
	var stored models.APIKey
	app.DB.Gorm.First(&stored, "account_id = ?", list[1].ID)
	if stored.Hash != models.HashKey(*list[1].APIKey) || stored.Sealed == "" || stored.Sealed == *list[1].APIKey {
		t.Errorf("account key must be stored as a hash plus a sealed copy")
	}
	other := newTenant(t, app, models.TenantInput{Name: "Other"})
	if others, _ := app.Accounts().Accounts(ctx, other); len(others) != 0 {
		t.Errorf("another tenant sees %d accounts", len(others))
	}
	if _, err := app.Accounts().RekeyAccount(ctx, other, list[0].ID); models.KindOf(err) != models.KindNotFound {
		t.Errorf("rekey of another tenant's account: %v, want not found", err)
	}
	if err := app.Accounts().ToggleAccount(ctx, other, list[0].ID, true); models.KindOf(err) != models.KindNotFound {
		t.Errorf("toggle of another tenant's account: %v, want not found", err)
	}
	if _, err := app.Accounts().SetAccountQuota(ctx, other, list[0].ID, models.QuotaInput{Shared: ptr(true)}); models.KindOf(err) != models.KindNotFound {
		t.Errorf("set-quota of another tenant's account: %v, want not found", err)
	}
}
