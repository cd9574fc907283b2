// Package modelstest gives tests a fresh, migrated database: a temporary SQLite file by default, or a
// new PostgreSQL database on the server of TEST_DATABASE_URL.
package modelstest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for administrative statements

	"studio/models"
)

// ExtraMigrations are run after the core's migrations on every test database (the queue's schema);
// packages that need them set this from an init function of their tests or of a wiring package.
var ExtraMigrations []func(db *models.DB) func(ctx context.Context) error

// PostgresURL returns TEST_DATABASE_URL when it names a PostgreSQL server.
func PostgresURL() string {
	u := os.Getenv("TEST_DATABASE_URL")
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		return u
	}
	return ""
}

// RequirePostgres skips the test unless TEST_DATABASE_URL names a PostgreSQL server.
func RequirePostgres(t testing.TB) {
	t.Helper()
	if PostgresURL() == "" {
		t.Skip("PostgreSQL test: set TEST_DATABASE_URL=postgres://... to run it")
	}
}

var (
	tplOnce sync.Once
	tplName string
	tplErr  error
	tplMu   sync.Mutex
)

// NewDB returns a fresh migrated database for one test, removed when the test ends.
func NewDB(t testing.TB) *models.DB {
	t.Helper()
	ctx := context.Background()
	if pg := PostgresURL(); pg != "" {
		return newPostgres(t, ctx, pg)
	}
	path := filepath.Join(t.TempDir(), "studio.db")
	db, err := models.OpenDB(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	if err := migrate(ctx, db); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// URLFor returns the URL of a fresh database: for tests that start whole servers (several replicas).
func URLFor(t testing.TB) string {
	t.Helper()
	if pg := PostgresURL(); pg != "" {
		return createPostgres(t, context.Background(), pg)
	}
	return "sqlite://" + filepath.Join(t.TempDir(), "studio.db")
}

func migrate(ctx context.Context, db *models.DB) error {
	var extra []func(context.Context) error
	for _, m := range ExtraMigrations {
		extra = append(extra, m(db))
	}
	return models.Migrate(ctx, db, extra...)
}

func withDB(raw, name string) string {
	u, _ := url.Parse(raw)
	u.Path = "/" + name
	return u.String()
}

func newPostgres(t testing.TB, ctx context.Context, server string) *models.DB {
	t.Helper()
	dbURL := createPostgres(t, ctx, server)
	db, err := models.OpenDB(ctx, dbURL)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	db.SQL.SetMaxOpenConns(30)
	t.Cleanup(func() { db.Close() })
	return db
}

// createPostgres clones a migrated template database (made once per test process) into a new one.
func createPostgres(t testing.TB, ctx context.Context, server string) string {
	t.Helper()
	admin, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		t.Fatalf("postgres at TEST_DATABASE_URL unreachable: %v", err)
	}
	tplOnce.Do(func() {
		tplName = fmt.Sprintf("studio_tpl_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
		if _, tplErr = admin.ExecContext(ctx, "CREATE DATABASE "+tplName); tplErr != nil {
			return
		}
		var db *models.DB
		db, tplErr = models.OpenDB(ctx, withDB(server, tplName))
		if tplErr != nil {
			return
		}
		tplErr = migrate(ctx, db)
		db.Close()
	})
	if tplErr != nil {
		t.Fatalf("postgres template database: %v", tplErr)
	}
	name := fmt.Sprintf("studio_t_%d_%d", os.Getpid(), time.Now().UnixNano())
	// CREATE DATABASE ... TEMPLATE fails while another session copies the same template: serialise.
	tplMu.Lock()
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE "+tplName)
	tplMu.Unlock()
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("pgx", server)
		if err != nil {
			return
		}
		defer a.Close()
		_, _ = a.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return withDB(server, name)
}

// Main runs a package's tests and then drops the PostgreSQL template database it made.
func Main(m *testing.M) {
	code := m.Run()
	if tplName != "" {
		if a, err := sql.Open("pgx", PostgresURL()); err == nil {
			_, _ = a.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+tplName+" WITH (FORCE)")
			a.Close()
		}
	}
	os.Exit(code)
}
