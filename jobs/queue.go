// Package jobs owns asynchronous work: the durable queue (River on the service's own database), the
// workers of image jobs, video tasks and callbacks, and the periodic upstream probes.
package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/tidwall/gjson"
	"gorm.io/gorm"

	"studio/models"
	"studio/models/metrics"
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
	Workers    *river.Workers
	Periodic   []*river.PeriodicJob
	MaxWorkers int
	// TaskWorkers bounds the runs of the queue of provider tasks (queueTasks) at once.
	TaskWorkers int
	// JobTimeout bounds one run of the work whose worker sets no Timeout of its own (River's JobTimeout).
	JobTimeout time.Duration
	// RescueAfter is River's RescueStuckJobsAfter: a job running longer than this and than its worker's
	// Timeout (its replica died) is run again. At least JobTimeout (River requires it).
	RescueAfter  time.Duration
	PollInterval time.Duration
}

// queueTasks is the queue of the video tasks: starting each at a provider and following it, one short poll
// per run. Its own few workers follow any number of tasks (polls are seldom, videoPollDelay), and the
// default queue's workers stay free for picking up image jobs, callbacks and e-mail.
const queueTasks = "tasks"

// fetchCooldown is the least time between two fetches of jobs: the runs are short (a pick-up, one poll),
// so jobs are fetched often, in small batches, and start soon after their submit commits.
const fetchCooldown = 20 * time.Millisecond

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
	rcfg := func() *river.Config {
		return &river.Config{
			Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers},
				queueTasks: {MaxWorkers: cfg.TaskWorkers}},
			Workers:      cfg.Workers,
			PeriodicJobs: cfg.Periodic,
			// Every run is bounded (here, or by its worker's Timeout), and River's rescuer takes a job only
			// once it has run longer than both RescueStuckJobsAfter and that bound: a live run has ended by
			// then, so nothing of ours writes River's tables to keep it (see jobs/service.go: RescueAfter).
			JobTimeout:                  cfg.JobTimeout,
			RescueStuckJobsAfter:        cfg.RescueAfter,
			Middleware:                  []rivertype.Middleware{&runPhase{}},
			FetchPollInterval:           cfg.PollInterval,
			FetchCooldown:               minDuration(cfg.PollInterval, fetchCooldown),
			MaxAttempts:                 10,
			Logger:                      slog.New(warnings{slog.Default().Handler()}).With("component", "queue"),
			CompletedJobRetentionPeriod: 24 * time.Hour,
		}
	}
	q := &Queue{}
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
		client, err := river.NewClient(riverpgxv5.New(pool), rcfg())
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("queue: %w", err)
		}
		// The inserter wakes the workers' fetch (LISTEN) at most once per FetchCooldown per queue: with
		// River's default of 100 ms a job submitted at rest waited up to 100 ms before it was fetched.
		inserter, err := river.NewClient(riverdatabasesql.New(db.SQL), &river.Config{FetchCooldown: fetchCooldown})
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

// Runs that wait. An image job or a video task that follows a provider's task polls it in runs of one
// poll each, snoozed in between (waitAgain): such a run is short, so it is bounded by waitBudget and the
// job of a replica that died mid-poll is rescued after RescueAfter rather than after a whole run budget.
// That the next run only polls is recorded with the job by River itself: waitAgain stores it as the run's
// output (river.RecordOutput, kept in River's metadata of the job), where Timeout finds it in the job row
// River hands it, both when a run starts and when River's rescuer looks at a job. Any other end of a
// polling run (a result to download, a hand-back, an error) clears it (runPhase), so the run after it has
// the whole budget again.
const (
	waitBudget    = 10 * time.Second
	outputWaiting = "waiting"
)

// waitAgain ends a run that found its job waiting on a provider's task (still running, or a poll that
// failed in passing): the job is run again after d, for one poll.
func waitAgain(ctx context.Context, d time.Duration) error {
	_ = river.RecordOutput(ctx, outputWaiting) // outside a River run there is nothing to record
	return river.JobSnooze(d)
}

// waitingRun reports whether the job's last run ended with waitAgain.
func waitingRun(job *rivertype.JobRow) bool {
	return gjson.GetBytes(job.Metadata, rivertype.MetadataKeyOutput).String() == outputWaiting
}

type waitingKey struct{}

// runPhase is the River worker middleware that starts a polling run: it marks its context (runBudget)
// and clears the record, which only waitAgain sets again.
type runPhase struct{ river.MiddlewareDefaults }

func (*runPhase) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	metrics.QueueRunning.Inc()
	defer metrics.QueueRunning.Dec()
	if !waitingRun(job) {
		return doInner(ctx)
	}
	_ = river.RecordOutput(ctx, nil)
	return doInner(context.WithValue(ctx, waitingKey{}, true))
}

// runBudget is how long the run of ctx may take: waitBudget for a run that only polls, attemptBudget
// (never more than half the job deadline) for another run of the queue, the whole deadline for a
// generation held outside the queue (inflight.go).
func runBudget(ctx context.Context, deadline time.Duration) time.Duration {
	if heldOutsideQueue(ctx) {
		return deadline
	}
	if waiting, _ := ctx.Value(waitingKey{}).(bool); waiting {
		return min(waitBudget, attemptBudget(deadline))
	}
	return attemptBudget(deadline)
}

// runTimeout is River's bound of a run of an image job or a video task, and the age from which its
// rescuer runs the job again when the replica running it died: the run's budget and the margin for
// handing the job back.
func runTimeout(job *rivertype.JobRow, deadline time.Duration) time.Duration {
	if waitingRun(job) {
		return min(waitBudget, attemptBudget(deadline)) + runMargin
	}
	return attemptBudget(deadline) + runMargin
}

// Timeout bounds one run of an image job (runTimeout).
func (w *imageWorker) Timeout(job *river.Job[ImageJobArgs]) time.Duration {
	return runTimeout(job.JobRow, w.s.App.Config.JobDeadline)
}

// Timeout bounds one run of a video task (runTimeout): a start, or one poll.
func (w *videoWorker) Timeout(job *river.Job[VideoTaskArgs]) time.Duration {
	return runTimeout(job.JobRow, w.s.App.Config.JobDeadline)
}

// Timeout bounds the delivery of one e-mail: the core bounds its SMTP conversation to 20 s.
func (w *mailWorker) Timeout(*river.Job[MailArgs]) time.Duration { return 25 * time.Second }

// Timeout bounds one pass of probes (each probe has its own bound of at most 30 s).
func (w *probeWorker) Timeout(*river.Job[ProbeArgs]) time.Duration { return periodicTimeout }

// Timeout bounds one pass of the deadline sweep and the pruning of expired rows.
func (w *sweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration { return periodicTimeout }

// warnings passes on River's warnings and errors only: its informational lines (producer job counts every
// 30 s, "entering poll only mode" on SQLite) say nothing an operator acts on. An error that is only the
// queue's own context ending (a maintenance pass cut by the stop, such as the periodic job enqueuer's
// "Error starting transaction ... context canceled") is passed on as information: a replica that stops
// has nothing to fix.
type warnings struct{ slog.Handler }

func (w warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError && cutByStop(r) {
		r = r.Clone()
		r.Level = slog.LevelInfo
	}
	return w.Handler.Handle(ctx, r)
}

// cutByStop reports whether a record's error ends in a cancelled context (River's contexts are cancelled
// only by the stop). A deadline passed stays an error: a database too slow for a maintenance pass is one.
func cutByStop(r slog.Record) bool {
	cut := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			cut = strings.HasSuffix(a.Value.String(), context.Canceled.Error())
			return false
		}
		return true
	})
	return cut
}

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

// poolFigures reads the connection pools of the process: the requests', the background work's (on
// PostgreSQL) and the queue's (on PostgreSQL).
func poolFigures(db *models.DB, q *Queue) []metrics.Pool {
	st := db.SQL.Stats()
	out := []metrics.Pool{{Name: "requests", Open: st.OpenConnections, InUse: st.InUse}}
	if db.Work != nil && db.Work != db.SQL {
		st = db.Work.Stats()
		out = append(out, metrics.Pool{Name: "work", Open: st.OpenConnections, InUse: st.InUse})
	}
	if q.pool != nil {
		st := q.pool.Stat()
		out = append(out, metrics.Pool{Name: "queue", Open: int(st.TotalConns()), InUse: int(st.AcquiredConns())})
	}
	return out
}

// workQueue is the core's models.Enqueuer: the service's queue.
type workQueue struct{ s *Service }

// Enqueue maps units of work to queue arguments, inserted together inside tx.
func (wq workQueue) Enqueue(tx *gorm.DB, work ...models.Work) error {
	s := wq.s
	params := make([]river.InsertManyParams, 0, len(work))
	for _, w := range work {
		opts := &river.InsertOpts{}
		if w.Delay > 0 {
			opts.ScheduledAt = time.Now().Add(w.Delay)
		}
		var args river.JobArgs
		switch w.Kind {
		case models.WorkImage:
			args = ImageJobArgs{JobID: w.ID}
		case models.WorkCallback:
			opts.MaxAttempts = len(s.opts.CallbackBackoff) + 1
			args = CallbackArgs{JobID: w.ID}
		case models.WorkVideoTask:
			opts.Queue = queueTasks
			args = VideoTaskArgs{TaskID: w.ID}
		case models.WorkMail:
			opts.MaxAttempts = mailAttempts
			args = MailArgs{Sealed: w.Payload}
		default:
			return fmt.Errorf("jobs: unknown work kind %q", w.Kind)
		}
		params = append(params, river.InsertManyParams{Args: args, InsertOpts: opts})
	}
	return s.queue.InsertManyTx(tx, params)
}
