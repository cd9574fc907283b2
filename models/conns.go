package models

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"studio/models/config"
	"studio/models/pglisten"
)

// The PostgreSQL connections of a replica. One number bounds them all (SERVICE_DB_MAX_CONNS, or
// pool_max_conns in DATABASE_URL), split between the pools that must never wait for each other:
//
//   - Listen: the two dedicated connections of notifications: the process's one listener
//     (models/pglisten, shared by the identity cache and the event broker) and the events' notifier;
//   - Queue: River's pool (fetching, completing, the leader's maintenance, its own LISTEN);
//   - Work: the statements of background work (WorkContext), few on purpose (see requestConns);
//   - Requests: the rest, for the requests being served.
//
// N replicas need N × the budget, plus what administration keeps (psql, backups, PostgreSQL's
// superuser_reserved_connections): with the default 30, three replicas take 90 of PostgreSQL's default
// 100 and leave 10.

// DefaultMaxConns is the default connection budget of a replica.
const DefaultMaxConns = 30

// MinMaxConns is the smallest budget that leaves every pool something (a setting's bound: models/config).
const MinMaxConns = config.MinMaxConns

// ConnBudget is how a replica's PostgreSQL connections are split.
type ConnBudget struct {
	Total, Requests, Work, Queue, Listen int
}

// SplitConns splits a replica's budget; below MinMaxConns it is an error naming the setting.
func SplitConns(total int) (ConnBudget, error) {
	if total < MinMaxConns {
		return ConnBudget{}, fmt.Errorf("config: SERVICE_DB_MAX_CONNS=%d: a replica needs at least %d PostgreSQL connections "+
			"(2 for notifications, the queue, background work and requests); raise it", total, MinMaxConns)
	}
	b := ConnBudget{Total: total, Listen: 2, Queue: max(3, total/4), Work: max(2, total/10)}
	b.Requests = total - b.Listen - b.Queue - b.Work
	return b, nil
}

// pgxPoolParams are the pgxpool settings a DATABASE_URL may carry; PostgreSQL itself does not know them.
var pgxPoolParams = []string{"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime",
	"pool_max_conn_lifetime_jitter", "pool_max_conn_idle_time", "pool_health_check_period"}

// PostgresConfig parses a postgres:// DATABASE_URL into the configuration of one connection, without the
// pool settings it may carry (pool_max_conns and the like, which pgx would otherwise send to the server
// as run-time parameters, and PostgreSQL refuses), and returns pool_max_conns when the URL sets it.
func PostgresConfig(rawURL string) (*pgx.ConnConfig, int, error) {
	pcfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, 0, fmt.Errorf("database: postgres: %w", err)
	}
	maxConns := 0
	if u, err := url.Parse(rawURL); err == nil && u.Query().Has("pool_max_conns") {
		maxConns = int(pcfg.MaxConns)
	}
	return pcfg.ConnConfig, maxConns, nil
}

// PoolURL returns a postgres:// URL without the pool settings it may carry (for clients that would send
// them to the server).
func PoolURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	q := u.Query()
	for _, p := range pgxPoolParams {
		q.Del(p)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// NewListener returns a PostgreSQL listener (models/pglisten) on db's server: the process's one LISTEN
// connection, counted in ConnBudget.Listen. jobs.New makes one and gives it to the core (Deps.Listener)
// and to the event broker; either, built without it, makes its own. Nothing connects before its Start.
func NewListener(db *DB, opts pglisten.Options) *pglisten.Listener {
	cfg, _, err := PostgresConfig(db.URL)
	if err != nil {
		return pglisten.New(func(context.Context) (*pgx.Conn, error) { return nil, err }, opts)
	}
	return pglisten.New(pglisten.Connect(cfg), opts)
}
