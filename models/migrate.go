package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"testing/fstest"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"studio/models/migrations"
)

// The schema is versioned SQL per dialect (models/migrations), applied by goose: a change is a new
// numbered file, a released one is never edited. Nothing derives the schema from the structs at run time.

// gooseTable is goose's record of the versions applied (its default name).
const gooseTable = "goose_db_version"

// legacyTable is the record of the numbering before goose, kept as it is (migrations/legacy).
const legacyTable = "schema_migrations"

// migrationLockKey is the PostgreSQL advisory lock that serialises replicas starting at once. The
// releases before goose took the same key, so one of them starting beside a newer replica takes turns
// with it.
const migrationLockKey = 7_246_310_001

// Migrate brings the schema to the newest version of models/migrations and then runs the extra steps (the
// queue's schema), all under one lock so that replicas starting together migrate once. A database of the
// numbering before goose is first brought to version 1 (handOver).
func Migrate(ctx context.Context, db *DB, extra ...func(ctx context.Context) error) error {
	unlock, err := db.lockMigrations(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := handOver(ctx, db); err != nil {
		return err
	}
	fsys, err := migrations.FS(string(db.Dialect))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := gooseUp(ctx, db, fsys, 0); err != nil {
		return err
	}
	for _, step := range extra {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// handOver brings a database of the numbering before goose (schema_migrations, versions 1 to 7, and no
// version 1 in goose's table) to version 1: the steps of that numbering it lacks run as frozen SQL
// (migrations/legacy), in one transaction with goose's record of version 1. The released schemas of
// versions 1 to 7 differ from version 1 by these steps only, apart from where the columns they add stand
// in their tables (last), which no query depends on (models/testdata/released, compared by
// TestUpgradeFromEveryReleasedVersion). A schema_migrations with no row records a first start that failed
// before any step: it is dropped and the database is taken as new.
func handOver(ctx context.Context, db *DB) error {
	gdb := db.WithContext(ctx)
	m := gdb.Migrator()
	if !m.HasTable(legacyTable) {
		return nil
	}
	if m.HasTable(gooseTable) {
		var n int64
		if err := gdb.Table(gooseTable).Where("version_id = ?", 1).Count(&n).Error; err != nil {
			return fmt.Errorf("migrate: read %s: %w", gooseTable, err)
		}
		if n > 0 {
			return nil
		}
	}
	var versions []int
	if err := gdb.Raw("SELECT version FROM " + legacyTable).Scan(&versions).Error; err != nil {
		return fmt.Errorf("migrate: read %s: %w", legacyTable, err)
	}
	if len(versions) == 0 {
		if err := gdb.Exec("DROP TABLE " + legacyTable).Error; err != nil {
			return fmt.Errorf("migrate: drop the empty %s: %w", legacyTable, err)
		}
		return nil
	}
	if !slices.Contains(versions, 1) || slices.Max(versions) > migrations.LegacyLast {
		slices.Sort(versions)
		return fmt.Errorf("migrate: %s holds versions %v: not a database of a released version (1 to %d)",
			legacyTable, versions, migrations.LegacyLast)
	}
	var up strings.Builder
	up.WriteString("-- Version 1 for a database of the numbering before goose: the steps it lacked.\n-- +goose Up\n")
	var steps []int
	for v := 2; v <= migrations.LegacyLast; v++ {
		if slices.Contains(versions, v) {
			continue
		}
		sql, err := migrations.LegacyStep(string(db.Dialect), v)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		up.WriteString(sql)
		steps = append(steps, v)
	}
	fsys := fstest.MapFS{"00001_schema_migrations.sql": &fstest.MapFile{Data: []byte(up.String())}}
	if err := gooseUp(ctx, db, fsys, 0); err != nil {
		return fmt.Errorf("migrate: from %s (steps %v): %w", legacyTable, steps, err)
	}
	slog.Info("schema_migrations handed over to goose", "steps_run", steps)
	return nil
}

// gooseUp applies the pending goose migrations of fsys. On PostgreSQL goose takes its own session lock
// too (goose's key): it matters to goose run from outside the service, as replicas hold migrationLockKey
// already.
func gooseUp(ctx context.Context, db *DB, fsys fs.FS, upTo int64) error {
	dialect := goose.DialectSQLite3
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if db.Dialect == Postgres {
		dialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 600))
		if err != nil {
			return fmt.Errorf("migrate: goose lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	// The provider is not closed: Close would close db.SQL.
	p, err := goose.NewProvider(dialect, db.SQL, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var results []*goose.MigrationResult
	if upTo > 0 {
		results, err = p.UpTo(ctx, upTo)
	} else {
		results, err = p.Up(ctx)
	}
	var partial *goose.PartialError
	if errors.As(err, &partial) {
		results = partial.Applied
	}
	for _, r := range results {
		slog.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// lockMigrations takes a session advisory lock on PostgreSQL; SQLite has a single writer connection already.
func (db *DB) lockMigrations(ctx context.Context) (func(), error) {
	if db.Dialect != Postgres {
		return func() {}, nil
	}
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: lock connection: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		conn.Close()
		return nil, fmt.Errorf("migrate: advisory lock: %w", err)
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", migrationLockKey)
		conn.Close()
	}, nil
}
