package models_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"studio/models"
	"studio/models/modelstest"
)

// TestMigrateFromTwoReplicasAtOnce starts two migrations of one empty PostgreSQL database together: the
// advisory lock lets one apply every step while the other waits and then finds nothing left to do.
func TestMigrateFromTwoReplicasAtOnce(t *testing.T) {
	modelstest.RequirePostgres(t)
	server := modelstest.PostgresURL()
	admin, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := fmt.Sprintf("studio_migrate_%d", time.Now().UnixNano())
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	u, _ := url.Parse(server)
	u.Path = "/" + name
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			db, err := models.OpenDB(ctx, u.String())
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			errs[i] = models.Migrate(ctx, db)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	db, err := models.OpenDB(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var versions []int
	db.Gorm.Raw("SELECT version FROM schema_migrations ORDER BY version").Scan(&versions)
	if len(versions) != len(models.Migrations) {
		t.Fatalf("schema_migrations = %v, want each of the %d versions once", versions, len(models.Migrations))
	}
}

// TestUpgradeEndsTheLoginsOfClaimedAccounts upgrades a database of version 4, where a redemption gave a
// login token for any e-mail (D8 as first written), to the current version: every login of an account a
// code was redeemed for ends (tokens and console sessions), and other accounts keep theirs.
func TestUpgradeEndsTheLoginsOfClaimedAccounts(t *testing.T) {
	ctx := context.Background()
	dbURL := modelstest.URLFor(t)
	open := func() *models.App {
		db, err := models.OpenDB(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := models.Migrate(ctx, db); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		app, err := models.NewApp(ctx, db, models.DefaultConfig(), models.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		return app
	}
	app := open()
	tenant := newTenant(t, app, models.TenantInput{Credits: ptr[int64](100)})
	victim, bystander := newUser(t, app, 0), newUser(t, app, 0)
	var v models.User
	app.DB.Gorm.First(&v, "id = ?", victim.UserID)
	// Tokens issued at version 0 carry no version, as every token of version 4 did.
	victimToken, _, err := app.Auth().IssueUserToken(victim.UserID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bystanderToken, _, _ := app.Auth().IssueUserToken(bystander.UserID, time.Hour)
	session, err := app.Auth().StartUserSession(ctx, victim.UserID)
	if err != nil {
		t.Fatal(err)
	}
	code := newClaim(t, app, tenant, 1, platformTemplate(t, app, "poster"))
	if _, err := app.Claims().RedeemClaim(ctx, models.RedeemInput{Code: code.Code, Nickname: "x", Email: v.Email}, ""); err != nil {
		t.Fatal(err)
	}
	// Back to version 4: without the columns and the step of version 5; then the upgrade, as a restart.
	m := app.DB.Gorm.Migrator()
	if err := m.DropColumn(&models.User{}, "TokenVersion"); err != nil {
		t.Fatal(err)
	}
	if err := m.DropColumn(&models.EmailCode{}, "Attempts"); err != nil {
		t.Fatal(err)
	}
	if err := app.DB.Gorm.Exec("DELETE FROM schema_migrations WHERE version = 5").Error; err != nil {
		t.Fatal(err)
	}
	app.DB.Close()
	app = open()
	if _, err := app.Auth().ResolveIdentity(ctx, victimToken); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("a token of a claimed account after the upgrade: %v, want unauthenticated", err)
	}
	if _, err := app.Auth().SessionUser(ctx, session); models.KindOf(err) != models.KindUnauthenticated {
		t.Fatalf("a console session of a claimed account after the upgrade: %v, want unauthenticated", err)
	}
	if id, err := app.Auth().ResolveIdentity(ctx, bystanderToken); err != nil || id.UserID != bystander.UserID {
		t.Fatalf("another account's token after the upgrade: %v", err)
	}
}
