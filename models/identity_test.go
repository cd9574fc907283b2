package models_test

import (
	"context"
	"testing"
	"time"

	"studio/models"
	"studio/models/modelstest"
)

// resolve resolves a credential and fails the test on an error.
func resolve(t *testing.T, app *models.App, key string) *models.Identity {
	t.Helper()
	id, err := app.Auth().ResolveIdentity(context.Background(), key)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return id
}

// refused reports whether a credential is refused as unauthenticated.
func refused(app *models.App, key string) bool {
	_, err := app.Auth().ResolveIdentity(context.Background(), key)
	return models.KindOf(err) == models.KindUnauthenticated
}

// readyCache waits until the App's identity cache serves entries.
func readyCache(t *testing.T, app *models.App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Auth().IdentityCacheReady(ctx); err != nil {
		t.Fatalf("identity cache not ready: %v", err)
	}
}

// dropKeyBehindTheCache deletes a key row without announcing it, as only a broken change path would.
func dropKeyBehindTheCache(t *testing.T, app *models.App, key string) {
	t.Helper()
	if err := app.DB.Gorm.Where("hash = ?", models.HashKey(key)).Delete(&models.APIKey{}).Error; err != nil {
		t.Fatal(err)
	}
}

func TestIdentityCacheServesKeysWithoutTheDatabase(t *testing.T) {
	app := newApp(t)
	readyCache(t, app)
	ten, key, err := app.Accounts().CreateTenant(context.Background(), models.TenantInput{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	if id := resolve(t, app, key); id.Kind != models.IdentityTenant || id.TenantID != ten.ID {
		t.Fatalf("identity = %+v", id)
	}
	dropKeyBehindTheCache(t, app, key)
	id := resolve(t, app, key) // from the cache
	if id.TenantID != ten.ID {
		t.Fatalf("cached identity = %+v", id)
	}
	id.Agent = "changed by the caller"
	if again := resolve(t, app, key); again.Agent != "" {
		t.Fatalf("a caller's change leaked into the cache: %+v", again)
	}
}

func TestIdentityCacheEvictsOnRekeyAndDisableAtOnce(t *testing.T) {
	app := newApp(t)
	readyCache(t, app)
	ctx := context.Background()
	ten, tenantKey, err := app.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := app.Accounts().CreateAccount(ctx, modelstest.Tenant(ten.ID), models.AccountInput{Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	memberKey := *acc.APIKey
	resolve(t, app, tenantKey)
	if id := resolve(t, app, memberKey); id.Kind != models.IdentityAccount || id.AccountID != acc.ID {
		t.Fatalf("member identity = %+v", id)
	}

	newMemberKey, err := app.Accounts().RekeyAccount(ctx, modelstest.Tenant(ten.ID), acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !refused(app, memberKey) {
		t.Fatal("the old member key still works right after its rekey")
	}
	resolve(t, app, newMemberKey)
	if err := app.Accounts().ToggleAccount(ctx, modelstest.Tenant(ten.ID), acc.ID, true); err != nil {
		t.Fatal(err)
	}
	if !refused(app, newMemberKey) {
		t.Fatal("a disabled member's key still works right after the disable")
	}
	if err := app.Accounts().ToggleAccount(ctx, modelstest.Tenant(ten.ID), acc.ID, false); err != nil {
		t.Fatal(err)
	}
	resolve(t, app, newMemberKey)

	newTenantKey, err := app.Accounts().RekeyTenant(ctx, ten.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !refused(app, tenantKey) {
		t.Fatal("the old tenant key still works right after the tenant rekey")
	}
	resolve(t, app, newTenantKey)
}

func TestIdentityCacheKeepsLoginExpiry(t *testing.T) {
	app := newApp(t)
	readyCache(t, app)
	u := newUser(t, app, 0)
	tok, _, err := app.Auth().IssueUserToken(u.UserID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id := resolve(t, app, tok); id.Kind != models.IdentityUser || id.UserID != u.UserID {
		t.Fatalf("login identity = %+v", id)
	}
	resolve(t, app, tok) // cached
	start := time.Now()
	app.Now = func() time.Time { return start.Add(2 * time.Hour) }
	if !refused(app, tok) {
		t.Fatal("an expired login is accepted from the cache")
	}
}

// TestIdentityCacheFollowsChangesAcrossReplicas runs two Apps (two replicas) on one PostgreSQL
// database: a rekey on one evicts the other's cached identity at once, through LISTEN/NOTIFY.
func TestIdentityCacheFollowsChangesAcrossReplicas(t *testing.T) {
	modelstest.RequirePostgres(t)
	ctx := context.Background()
	dbURL := modelstest.URLFor(t)
	replica := func() *models.App {
		db, err := models.OpenDB(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		app, err := models.NewApp(ctx, db, models.DefaultConfig(), models.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		readyCache(t, app)
		return app
	}
	one, two := replica(), replica()
	ten, key, err := one.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	_, bystanderKey, err := one.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Bystander"})
	if err != nil {
		t.Fatal(err)
	}
	resolve(t, two, key)
	resolve(t, two, bystanderKey)
	// The second replica serves from its cache: a row removed behind its back still resolves there.
	dropKeyBehindTheCache(t, one, bystanderKey)
	resolve(t, two, bystanderKey)

	if _, err := one.Accounts().RekeyTenant(ctx, ten.ID); err != nil {
		t.Fatal(err)
	}
	// The rekey returns once its own replica heard the notice; the other hears it at the same moment.
	rekeyed, checks := time.Now(), 1
	for ; !refused(two, key); checks++ {
		if time.Since(rekeyed) > 2*time.Second {
			t.Fatal("the other replica still accepts the old key 2 s after the rekey (the cache TTL is 30 s)")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the other replica refused the old key at check %d, %s after the rekey returned", checks, time.Since(rekeyed).Round(time.Microsecond))
	// The eviction is precise: the other tenant's entry is still cached.
	resolve(t, two, bystanderKey)
}

// TestIdentityCacheSeesAnotherProcessOnSQLite runs the server's App and a second App on its own
// connection (as `studio admin` in another process would) over one SQLite file: a rekey by the second
// empties the server's cache within the watcher's interval.
func TestIdentityCacheSeesAnotherProcessOnSQLite(t *testing.T) {
	if modelstest.PostgresURL() != "" {
		t.Skip("SQLite test")
	}
	ctx := context.Background()
	db := modelstest.NewDB(t)
	server, err := models.NewApp(ctx, db, models.DefaultConfig(), models.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	readyCache(t, server)
	other, err := models.OpenDB(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	cli, err := models.NewApp(ctx, other, models.DefaultConfig(), models.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ten, key, err := server.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	resolve(t, server, key)
	time.Sleep(300 * time.Millisecond) // let the watcher take the data version after the server's own writes
	if _, err := cli.Accounts().RekeyTenant(ctx, ten.ID); err != nil {
		t.Fatal(err)
	}
	rekeyed := time.Now()
	for !refused(server, key) {
		if time.Since(rekeyed) > 2*time.Second {
			t.Fatal("the server still accepts a key rekeyed by another process 2 s later")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the server refused the old key %s after another process rekeyed it", time.Since(rekeyed).Round(time.Millisecond))
}
