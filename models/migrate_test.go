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
	db.Raw("SELECT version FROM schema_migrations ORDER BY version").Scan(&versions)
	if len(versions) != len(models.Migrations) {
		t.Fatalf("schema_migrations = %v, want each of the %d versions once", versions, len(models.Migrations))
	}
}
