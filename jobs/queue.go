// Package jobs owns asynchronous work: the durable queue (River on the service's own database), the
// workers of image jobs, video tasks and callbacks, and the periodic upstream probes.
package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"studio/models"
)

// MigrateQueue returns the migration step that creates River's tables, run under the core's migration lock.
func MigrateQueue(db *models.DB) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var err error
		switch db.Dialect {
		case models.SQLite:
			var m *rivermigrate.Migrator[*sql.Tx]
			if m, err = rivermigrate.New(riversqlite.New(db.SQL), nil); err == nil {
				_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
			}
		default:
			var m *rivermigrate.Migrator[*sql.Tx]
			if m, err = rivermigrate.New(riverdatabasesql.New(db.SQL), nil); err == nil {
				_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
			}
			if err == nil {
				err = indexArgsDirectly(ctx, db)
			}
		}
		if err != nil {
			return fmt.Errorf("migrate: queue schema: %w", err)
		}
		return nil
	}
}

// indexArgsDirectly turns off the pending list of River's GIN indexes on job arguments and metadata.
// With it, inserts append to a list that the inserting transaction itself merges into the index once it
// exceeds gin_pending_list_limit (4 MB): at a thousand jobs a second that stalled one enqueue, and every
// submit queued behind it, for about 200 ms every half minute. Without it, each insert pays its own small
// share. Idempotent; River's migrations may recreate the indexes, and the next start turns it off again.
func indexArgsDirectly(ctx context.Context, db *models.DB) error {
	var pending []string
	err := db.WithContext(ctx).Raw(`SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'i' AND c.relname IN ('river_job_args_index', 'river_job_metadata_index')
		AND NOT coalesce(c.reloptions @> ARRAY['fastupdate=off'], false)`).Scan(&pending).Error
	for i := 0; err == nil && i < len(pending); i++ {
		if err = db.WithContext(ctx).Exec("ALTER INDEX " + pending[i] + " SET (fastupdate = off)").Error; err == nil {
			err = db.WithContext(ctx).Exec("SELECT gin_clean_pending_list(?::regclass)", pending[i]).Error
		}
	}
	if err != nil {
		return fmt.Errorf("queue: index settings: %w", err)
	}
	return nil
}

// QueueConfig tunes the queue.
type QueueConfig struct {
	Workers      *river.Workers
	Periodic     []*river.PeriodicJob
	MaxWorkers   int
	JobTimeout   time.Duration // longest a single run of a job may take
	RescueAfter  time.Duration // a running job whose heartbeat is older than this (its worker died) is run again
	Heartbeat    time.Duration // how often a running job's heartbeat is written (well under RescueAfter)
	PollInterval time.Duration
}

// Queue is the durable queue: inserts happen inside the core's transactions, workers run in this process.
type Queue struct {
	insertMany func(ctx context.Context, tx *sql.Tx, params []river.InsertManyParams) error
	start      func(ctx context.Context) error
	stop       func(ctx context.Context) error
	cancel     func(ctx context.Context) error // StopAndCancel
	pool       *pgxpool.Pool
}

// NewQueue builds the River clients for the database: riversqlite on SQLite, riverpgxv5 for the workers
// on PostgreSQL (LISTEN/NOTIFY wake-ups) with riverdatabasesql for inserts inside GORM transactions.
func NewQueue(ctx context.Context, db *models.DB, cfg QueueConfig) (*Queue, error) {
	var beat *heartbeat
	rcfg := func() *river.Config {
		return &river.Config{
			Queues:       map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}},
			Workers:      cfg.Workers,
			PeriodicJobs: cfg.Periodic,
			// Runs are bounded by the heartbeat middleware (River requires its own timeout to be shorter
			// than RescueStuckJobsAfter, which is short here because live jobs keep their heartbeat).
			JobTimeout:                  -1,
			RescueStuckJobsAfter:        cfg.RescueAfter,
			Middleware:                  []rivertype.Middleware{beat},
			FetchPollInterval:           cfg.PollInterval,
			FetchCooldown:               minDuration(cfg.PollInterval, 100*time.Millisecond),
			MaxAttempts:                 10,
			Logger:                      slog.New(warnings{slog.Default().Handler()}).With("component", "queue"),
			CompletedJobRetentionPeriod: 24 * time.Hour,
		}
	}
	q := &Queue{}
	beat = &heartbeat{every: cfg.Heartbeat, timeout: cfg.JobTimeout, db: db.SQL,
		stmt: "UPDATE river_job SET attempted_at = now() WHERE id = $1 AND state = 'running' AND attempt = $2"}
	if db.Dialect == models.SQLite {
		beat.stmt = "UPDATE river_job SET attempted_at = datetime('now', 'subsec') WHERE id = ? AND state = 'running' AND attempt = ?"
	}
	switch db.Dialect {
	case models.SQLite:
		client, err := river.NewClient(riversqlite.New(db.SQL), rcfg())
		if err != nil {
			return nil, fmt.Errorf("queue: %w", err)
		}
		q.insertMany = func(ctx context.Context, tx *sql.Tx, params []river.InsertManyParams) error {
			_, err := client.InsertManyFastTx(ctx, tx, params)
			return err
		}
		q.start, q.stop, q.cancel = client.Start, client.Stop, client.StopAndCancel
	default:
		pcfg, err := pgxpool.ParseConfig(db.URL)
		if err != nil {
			return nil, fmt.Errorf("queue: %w", err)
		}
		// The queue's share of the replica's connections (models.ConnBudget): fetching, completing and the
		// leader's maintenance in the pool, and River's LISTEN, which River takes from the pool and
		// hijacks (it then no longer counts there, and the pool may open another): one less in the pool.
		pcfg.MaxConns = int32(db.Conns.Queue - 1)
		if pcfg.MinConns > pcfg.MaxConns {
			pcfg.MinConns = pcfg.MaxConns
		}
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, fmt.Errorf("queue: connect: %w", err)
		}
		q.pool = pool
		beat.pool = pool
		client, err := river.NewClient(riverpgxv5.New(pool), rcfg())
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("queue: %w", err)
		}
		inserter, err := river.NewClient(riverdatabasesql.New(db.SQL), &river.Config{})
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("queue: inserter: %w", err)
		}
		q.insertMany = func(ctx context.Context, tx *sql.Tx, params []river.InsertManyParams) error {
			_, err := inserter.InsertManyFastTx(ctx, tx, params)
			return err
		}
		q.start, q.stop, q.cancel = client.Start, client.Stop, client.StopAndCancel
	}
	return q, nil
}

// heartbeat is the River worker middleware that keeps a running job from being rescued while its process
// is alive: every `every` it moves the job's attempted_at (the time River's rescuer compares with
// RescueStuckJobsAfter) to now. When the process dies the heartbeat stops, and River's rescuer (on the
// elected leader) makes the job available again once RescueStuckJobsAfter has passed since the last beat.
// It also bounds one run by timeout, as River's JobTimeout would.
type heartbeat struct {
	river.MiddlewareDefaults
	every   time.Duration
	timeout time.Duration
	stmt    string
	db      *sql.DB       // SQLite
	pool    *pgxpool.Pool // PostgreSQL: the queue's own pool, so that a busy request pool never delays a beat
}

func (h *heartbeat) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	if h.every <= 0 {
		return doInner(ctx)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(h.every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.every)
			var err error
			if h.pool != nil {
				_, err = h.pool.Exec(bctx, h.stmt, job.ID, job.Attempt)
			} else {
				_, err = h.db.ExecContext(bctx, h.stmt, job.ID, job.Attempt)
			}
			cancel()
			if err != nil {
				slog.Warn("queue: job heartbeat failed", "job", job.ID, "kind", job.Kind, "err", err)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	return doInner(ctx)
}

// warnings passes on River's warnings and errors only: its informational lines (producer job counts every
// 30 s, "entering poll only mode" on SQLite) say nothing an operator acts on.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnings{w.Handler.WithAttrs(attrs)}
}

func (w warnings) WithGroup(name string) slog.Handler { return warnings{w.Handler.WithGroup(name)} }

func minDuration(a, b time.Duration) time.Duration {
	if a > 0 && a < b {
		return a
	}
	return b
}

// InsertManyTx enqueues jobs inside the GORM transaction tx, so the work exists exactly when the
// transaction commits. It skips reading the inserted rows back (River's fast insert): nothing uses them,
// and on PostgreSQL decoding them cost more than the insert. Unique jobs are not supported here (a
// conflict would fail the transaction); only River's own periodic jobs are unique.
func (q *Queue) InsertManyTx(tx *gorm.DB, params []river.InsertManyParams) error {
	sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
	if !ok {
		return fmt.Errorf("queue: enqueue outside a transaction")
	}
	return q.insertMany(tx.Statement.Context, sqlTx, params)
}

// Start starts the workers.
func (q *Queue) Start(ctx context.Context) error { return q.start(ctx) }

// Stop stops fetching new work and waits for running work to finish (or ctx to end).
func (q *Queue) Stop(ctx context.Context) error {
	err := q.stop(ctx)
	if err != nil {
		// The grace is over: cancel what still runs; each run hands its job back (handBack) and River
		// records that before it returns.
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = q.cancel(cctx)
		cancel()
	}
	if q.pool != nil {
		q.pool.Close()
	}
	return err
}
