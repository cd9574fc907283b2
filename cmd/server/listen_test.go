package server_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"studio/cmd/server"
	"studio/jobs/events"
	"studio/models"
	"studio/models/modelstest"
)

// replicaOn opens a replica on dbURL and starts what listens (the event broker; the identity cache starts
// on first use), without workers, until the test ends.
func replicaOn(t *testing.T, dbURL, adminKey string) *server.Service {
	t.Helper()
	vars := map[string]string{"DATABASE_URL": dbURL, "SERVICE_ADMIN_KEY": adminKey, "SERVICE_DATA_DIR": t.TempDir()}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { s, ok := vars[v.Env]; return s, ok })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc, err := server.Open(ctx, cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if err := svc.Events.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Events.Stop)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := svc.App.Auth().IdentityCacheReady(rctx); err != nil {
		t.Fatalf("identity cache: %v", err)
	}
	eventually(t, "the broker listens", svc.Events.Listening)
	return svc
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// TestOneListenerCarriesCredentialChangesAndJobEvents runs two replicas on one PostgreSQL database. Each
// holds one LISTEN connection, which carries both the identity cache's evictions and the broker's job
// events. When those connections are killed they come back, each user runs its reconnect action (the
// cache starts empty again, the broker re-reads what it follows: a change that was never announced
// reaches the subscriber), and evictions and events cross between the replicas again.
func TestOneListenerCarriesCredentialChangesAndJobEvents(t *testing.T) {
	modelstest.RequirePostgres(t)
	ctx := context.Background()
	dbURL, adminKey := modelstest.URLFor(t), models.NewAPIKey()
	pg, err := sql.Open("pgx", modelstest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	var dbName string
	listeners := func() (byName, listening int) {
		t.Helper()
		if err := pg.QueryRow(`SELECT count(*), count(*) FILTER (WHERE query ILIKE 'listen %') FROM pg_stat_activity
			WHERE datname = $1 AND application_name = $2`, dbName, events.ListenerName).Scan(&byName, &listening); err != nil {
			t.Fatal(err)
		}
		return byName, listening
	}
	allConns := func() int {
		t.Helper()
		var n int
		if err := pg.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'listen %'`, dbName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	one := replicaOn(t, dbURL, adminKey)
	if err := one.DB.Gorm.Raw("SELECT current_database()").Scan(&dbName).Error; err != nil {
		t.Fatal(err)
	}
	// Both users of the first replica follow their channel; one connection listens for them.
	if n, l := listeners(); n != 1 || l != 1 || allConns() != 1 {
		t.Fatalf("one replica: %d listener connections (%d that ran LISTEN; %d LISTEN connections in all), want 1", n, l, allConns())
	}
	two := replicaOn(t, dbURL, adminKey)
	if n, l := listeners(); n != 2 || l != 2 || allConns() != 2 {
		t.Fatalf("two replicas: %d listener connections (%d that ran LISTEN; %d LISTEN connections in all), want 2", n, l, allConns())
	}

	credits := int64(10)
	ten, key, err := one.App.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Acme", Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	_, bystander, err := one.App.Accounts().CreateTenant(ctx, models.TenantInput{Name: "Bystander"})
	if err != nil {
		t.Fatal(err)
	}
	tenant := &models.Identity{Kind: models.IdentityTenant, TenantID: ten.ID}
	prompt := "a fox"
	p, err := one.App.Jobs().PrepareImage(ctx, tenant, models.GenerateRequest{Prompt: &prompt})
	if err != nil {
		t.Fatal(err)
	}
	created, err := one.App.Jobs().CreateImageJobs(ctx, tenant, []*models.PreparedImage{p})
	if err != nil {
		t.Fatal(err)
	}
	jobID := created[0].ID
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	states, err := two.Events.FollowJob(fctx, tenant, jobID)
	if err != nil {
		t.Fatal(err)
	}
	progress := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case v := <-states:
				if v.Progress == want {
					return
				}
			case <-deadline:
				t.Fatalf("the second replica's subscriber never saw progress %q", want)
			}
		}
	}
	resolves := func(app *models.App, key string) bool {
		_, err := app.Auth().ResolveIdentity(ctx, key)
		return err == nil
	}
	refusedWithin := func(app *models.App, key string, d time.Duration) {
		t.Helper()
		for start := time.Now(); resolves(app, key); time.Sleep(time.Millisecond) {
			if time.Since(start) > d {
				t.Fatalf("the second replica still accepts the key %s later", d)
			}
		}
	}
	dropBehindTheCache := func(key string) {
		t.Helper()
		if err := one.DB.Gorm.Where("hash = ?", models.HashKey(key)).Delete(&models.APIKey{}).Error; err != nil {
			t.Fatal(err)
		}
	}

	// An eviction and an event cross over the one connection.
	if !resolves(two.App, key) {
		t.Fatal("the tenant key does not resolve")
	}
	old := key
	if key, err = one.App.Accounts().RekeyTenant(ctx, ten.ID); err != nil {
		t.Fatal(err)
	}
	refusedWithin(two.App, old, 2*time.Second)
	if err := one.App.Jobs().SetJobProgress(ctx, jobID, "before the kill"); err != nil {
		t.Fatal(err)
	}
	progress("before the kill")

	// Changes nobody announces, made before the connections are lost: the second replica's cache serves a
	// key whose row is gone, and the followed job changes behind the broker's back.
	if !resolves(two.App, bystander) {
		t.Fatal("the bystander key does not resolve")
	}
	dropBehindTheCache(bystander)
	if !resolves(two.App, bystander) {
		t.Fatal("the cache does not serve the bystander key")
	}
	if err := one.DB.Gorm.Exec("UPDATE jobs SET progress = ?, updated_at = ? WHERE id = ?", "unannounced", time.Now().UTC(), jobID).Error; err != nil {
		t.Fatal(err)
	}

	if _, err := pg.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'listen %'`, dbName); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both replicas listen again", func() bool {
		n, l := listeners()
		return n == 2 && l == 2 && one.Events.Listening() && two.Events.Listening()
	})
	// The broker re-read what it follows; the cache started empty again.
	progress("unannounced")
	if resolves(two.App, bystander) {
		t.Fatal("the cache kept an entry across the lost connection")
	}

	// Evictions and events cross again, on one connection per replica.
	if !resolves(two.App, key) {
		t.Fatal("the new tenant key does not resolve")
	}
	if _, err := one.App.Accounts().RekeyTenant(ctx, ten.ID); err != nil {
		t.Fatal(err)
	}
	refusedWithin(two.App, key, 2*time.Second)
	if err := one.App.Jobs().SetJobProgress(ctx, jobID, "after the kill"); err != nil {
		t.Fatal(err)
	}
	progress("after the kill")
	if n, l := listeners(); n != 2 || l != 2 || allConns() != 2 {
		t.Fatalf("after the kill: %d listener connections (%d that ran LISTEN; %d LISTEN connections in all), want 2", n, l, allConns())
	}
}
