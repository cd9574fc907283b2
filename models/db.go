package models

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	_ "modernc.org/sqlite" // registers the pure Go "sqlite" driver
)

// Dialect names the database engine behind a DB.
type Dialect string

// The supported database engines.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DB is the service's database: GORM over one *sql.DB, with its dialect.
type DB struct {
	*gorm.DB
	SQL     *sql.DB
	Dialect Dialect
	URL     string
}

// sqlitePragmas are the settings that hold under concurrency (dependencies.md).
const sqlitePragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// OpenDB opens DATABASE_URL, checks that it answers, and returns the DB.
func OpenDB(ctx context.Context, rawURL string) (*DB, error) {
	dialect, dsn, err := ParseDatabaseURL(rawURL)
	if err != nil {
		return nil, err
	}
	gcfg := &gorm.Config{
		Logger:                 logger.New(slogWriter{}, logger.Config{SlowThreshold: 500 * time.Millisecond, LogLevel: logger.Warn, IgnoreRecordNotFoundError: true}),
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
		TranslateError:         true,
	}
	db := &DB{Dialect: Dialect(dialect), URL: rawURL}
	switch db.Dialect {
	case SQLite:
		if dir := filepath.Dir(dsn); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("database: create directory for %s: %w", dsn, err)
			}
		}
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		sqlDB, err := sql.Open("sqlite", "file:"+dsn+sep+sqlitePragmas)
		if err != nil {
			return nil, fmt.Errorf("database: open sqlite %s: %w", dsn, err)
		}
		// SQLite has one writer; a single connection serialises every statement without SQLITE_BUSY.
		sqlDB.SetMaxOpenConns(1)
		sqlDB.SetConnMaxLifetime(0)
		db.SQL = sqlDB
		db.DB, err = gorm.Open(sqlite.New(sqlite.Config{DriverName: "sqlite", Conn: sqlDB}), gcfg)
		if err != nil {
			return nil, fmt.Errorf("database: sqlite %s: %w", dsn, err)
		}
	case Postgres:
		db.DB, err = gorm.Open(postgres.New(postgres.Config{DSN: dsn,
			OptionOpenDB: []stdlib.OptionOpenDB{stdlib.OptionAfterConnect(unwrapPQArrays)}}), gcfg)
		if err != nil {
			return nil, fmt.Errorf("database: postgres: %w", err)
		}
		db.SQL, err = db.DB.DB()
		if err != nil {
			return nil, fmt.Errorf("database: postgres: %w", err)
		}
		db.SQL.SetMaxOpenConns(40)
		db.SQL.SetMaxIdleConns(40)
		db.SQL.SetConnMaxIdleTime(5 * time.Minute)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.SQL.PingContext(pctx); err != nil {
		db.SQL.Close()
		return nil, fmt.Errorf("database: cannot reach %s: %w", redactURL(rawURL), err)
	}
	return db, nil
}

// Close closes the connection pool.
func (db *DB) Close() error { return db.SQL.Close() }

// Ping reports whether the database answers within the context.
func (db *DB) Ping(ctx context.Context) error { return db.SQL.PingContext(ctx) }

type slogWriter struct{}

func (slogWriter) Printf(format string, args ...any) {
	slog.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "gorm")
}
