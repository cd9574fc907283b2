package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"studio/models/config"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	msqlite "modernc.org/sqlite" // the pure Go "sqlite" driver (registered on import) and its errors
	sqlite3 "modernc.org/sqlite/lib"
)

// Dialect names the database engine behind a DB.
type Dialect string

// The supported database engines.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DB is the service's database: GORM over its connection pools, with its dialect.
type DB struct {
	// Gorm is the ORM over the requests' pool (WithContext is the usual way in).
	Gorm    *gorm.DB
	SQL     *sql.DB // the pool of requests (and of everything not marked as background work)
	Work    *sql.DB // on PostgreSQL, the pool of background work (WorkContext); on SQLite, SQL itself
	Dialect Dialect
	URL     string
	// Conns is how the replica's PostgreSQL connections are split (zero on SQLite).
	Conns ConnBudget
}

// Each PostgreSQL pool of a replica has its share of the replica's budget (ConnBudget, README
// "Connections"): requests never wait for a connection that queue workers hold, however busy the queue
// is. Background work gets few on purpose: its statements are short and it is never in a hurry, and the
// pool is what bounds how many of them run at once. Workers whose upstreams answered together queue
// there instead of all running their statements at once and taking the cores (the database's too) from
// the requests being served: with 20, bench/load -submit-only had a p99 of 42–47 ms; with 4, 32–36 ms,
// and the same jobs per second.

// sqlitePragmas are the settings that hold under concurrency (dependencies.md).
const sqlitePragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// OpenDB opens DATABASE_URL with the default connection budget (OpenDBConns).
func OpenDB(ctx context.Context, rawURL string) (*DB, error) {
	return OpenDBConns(ctx, rawURL, DefaultMaxConns)
}

// OpenDBConns opens DATABASE_URL, checks that it answers, and returns the DB. On PostgreSQL the
// replica's connections are bounded by maxConns (SERVICE_DB_MAX_CONNS), or by pool_max_conns when the
// URL carries it; the URL's other pgxpool settings are accepted and apply to each pool.
func OpenDBConns(ctx context.Context, rawURL string, maxConns int) (*DB, error) {
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
		db.SQL, db.Work = sqlDB, sqlDB
		db.Gorm, err = gorm.Open(sqlite.New(sqlite.Config{DriverName: "sqlite", Conn: sqlDB}), gcfg)
		if err != nil {
			return nil, fmt.Errorf("database: sqlite %s: %w", dsn, err)
		}
	case Postgres:
		cfg, fromURL, err := PostgresConfig(dsn)
		if err != nil {
			return nil, err
		}
		if fromURL > 0 {
			maxConns = fromURL
		}
		if db.Conns, err = SplitConns(maxConns); err != nil {
			return nil, err
		}
		open := func(conns int) *sql.DB {
			d := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(unwrapPQArrays))
			d.SetMaxOpenConns(conns)
			d.SetMaxIdleConns(conns)
			d.SetConnMaxIdleTime(5 * time.Minute)
			return d
		}
		db.SQL, db.Work = open(db.Conns.Requests), open(db.Conns.Work)
		db.Gorm, err = gorm.Open(postgres.New(postgres.Config{Conn: &pools{requests: db.SQL, work: db.Work}}), gcfg)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("database: postgres: %w", err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.SQL.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database: cannot reach %s: %w", config.RedactURL(rawURL), err)
	}
	if db.Dialect == Postgres {
		openConns(pctx, db.SQL, min(db.Conns.Requests, warmConns))
		openConns(pctx, db.Work, db.Conns.Work)
	}
	return db, nil
}

// warmConns is how many connections of the requests' pool a replica opens as it starts, so that the
// first burst of requests (a replica just started behind a busy balancer) does not wait for PostgreSQL
// to start a backend per connection.
const warmConns = 8

// openConns opens up to n connections of pool at once and leaves them idle in it; a failure only ends
// the warm-up early (the pool opens connections when they are needed anyway).
func openConns(ctx context.Context, pool *sql.DB, n int) {
	conns := make([]*sql.Conn, 0, n)
	for range n {
		c, err := pool.Conn(ctx)
		if err != nil {
			break
		}
		if err := c.PingContext(ctx); err != nil {
			c.Close()
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
}

// Close closes the connection pools.
func (db *DB) Close() error {
	err := db.SQL.Close()
	if db.Work != nil && db.Work != db.SQL {
		err = errors.Join(err, db.Work.Close())
	}
	return err
}

type workKey struct{}

// WorkContext marks ctx as background work (queue workers, sweeps): on PostgreSQL its statements use
// the work pool, so that work never takes the connections requests need.
func WorkContext(ctx context.Context) context.Context { return context.WithValue(ctx, workKey{}, true) }

func isWork(ctx context.Context) bool { w, _ := ctx.Value(workKey{}).(bool); return w }

// RequestContext marks ctx as the requests' again: its statements use the requests' pool even when ctx
// derives from a WorkContext. For the few statements of background work that must not queue behind
// the work pool's backlog (a process's heartbeat: a late one makes it look dead).
func RequestContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, workKey{}, false)
}

// pools is GORM's connection pool on PostgreSQL: each statement or transaction goes to the pool of its
// context.
type pools struct{ requests, work *sql.DB }

var (
	_ gorm.ConnPool       = (*pools)(nil)
	_ gorm.TxBeginner     = (*pools)(nil)
	_ gorm.GetDBConnector = (*pools)(nil)
)

func (p *pools) of(ctx context.Context) *sql.DB {
	if ctx != nil && isWork(ctx) {
		return p.work
	}
	return p.requests
}

func (p *pools) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.of(ctx).PrepareContext(ctx, query)
}

func (p *pools) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.of(ctx).ExecContext(ctx, query, args...)
}

func (p *pools) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.of(ctx).QueryContext(ctx, query, planArgs(ctx, args)...)
}

func (p *pools) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.of(ctx).QueryRowContext(ctx, query, planArgs(ctx, args)...)
}

type planKey struct{}

// planEachTime marks ctx so that, on PostgreSQL, its queries are planned with their parameters on every
// execution. pgx prepares and caches each statement per connection (QueryExecModeCacheStatement), and from
// the sixth execution PostgreSQL may switch a prepared statement to a generic plan, which it keeps until
// the table is analysed again. For the reads of a tenant's jobs and video tasks that plan is made while
// the tenant has a few rows (a sequential scan is cheapest then) and stays after the table has grown:
// GET /api/jobs went from 0.7 to 29 ms at 100 000 jobs until ANALYZE. Marked queries run as pgx's
// QueryExecModeCacheDescribe instead: still one round trip, with an unnamed statement that PostgreSQL
// plans for the values at hand. Only these reads are marked: the submit path keeps its cached plans
// (planning every statement there cost a third of its throughput, bench/README.md).
func planEachTime(ctx context.Context) context.Context {
	return context.WithValue(ctx, planKey{}, true)
}

func planArgs(ctx context.Context, args []any) []any {
	if ctx == nil {
		return args
	}
	if each, _ := ctx.Value(planKey{}).(bool); !each {
		return args
	}
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}

func (p *pools) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return p.of(ctx).BeginTx(ctx, opts)
}

// WithContext returns the ORM for statements run under ctx.
func (db *DB) WithContext(ctx context.Context) *gorm.DB { return db.Gorm.WithContext(ctx) }

// GetDBConn is what gorm.DB.DB() returns: the requests' pool.
func (p *pools) GetDBConn() (*sql.DB, error) { return p.requests, nil }

// Ping reports whether the database answers within the context.
func (db *DB) Ping(ctx context.Context) error { return db.SQL.PingContext(ctx) }

type slogWriter struct{}

func (slogWriter) Printf(format string, args ...any) {
	slog.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "gorm")
}

// txAttempts bounds how often App.Tx runs one transaction that the database rolled back for a deadlock,
// a serialization failure or a busy SQLite file.
const txAttempts = 5

// retryableTxError reports whether err says that the database rolled the transaction back for a reason
// that running it again may not meet: a deadlock (PostgreSQL 40P01, the victim chosen by the deadlock
// detector), a serialization failure (40001), or SQLite's busy or locked database (SQLITE_BUSY,
// SQLITE_LOCKED, with their extended codes). The chain of causes is searched; a cause wrapped as text
// only is recognised by its SQLSTATE.
func retryableTxError(err error) bool {
	if err == nil {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40P01" || pg.Code == "40001"
	}
	var lite *msqlite.Error
	if errors.As(err, &lite) {
		code := lite.Code() & 0xff // the primary result code of an extended one
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLSTATE 40P01") || strings.Contains(msg, "SQLSTATE 40001")
}

// txBackoff is the pause before attempt+1 of a transaction: about 5 ms doubled per attempt, with full
// jitter, so that the transactions that met each other do not meet again in step.
func txBackoff(attempt int) time.Duration {
	ceiling := 5 * time.Millisecond << min(attempt-1, 5)
	return ceiling/2 + rand.N(ceiling/2+1)
}

// sleepCtx waits d, or less when ctx ends first; it reports whether the whole pause passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// txHooks are the functions to run once the transaction of one App.Tx attempt has committed.
type txHooks struct{ fns []func() }

type txHooksKey struct{}

func (h *txHooks) run() {
	for _, fn := range h.fns {
		fn()
	}
}

// afterCommit runs fn once tx has committed, when tx is a transaction of App.Tx (an attempt that is rolled
// back and run again forgets it); on any other handle it runs fn at once.
func afterCommit(tx *gorm.DB, fn func()) {
	if tx != nil && tx.Statement != nil && tx.Statement.Context != nil {
		if h, ok := tx.Statement.Context.Value(txHooksKey{}).(*txHooks); ok {
			h.fns = append(h.fns, fn)
			return
		}
	}
	fn()
}
