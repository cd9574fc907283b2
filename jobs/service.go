package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"studio/jobs/events"
	"studio/jobs/relay"
	"studio/jobs/routing"
	"studio/jobs/upstream"

	// The upstream task protocols register themselves (upstream.RegisterProtocol).
	_ "studio/jobs/upstream/ark"
	_ "studio/jobs/upstream/dashscope"
	_ "studio/jobs/upstream/fal"
	_ "studio/jobs/upstream/gemini"
	_ "studio/jobs/upstream/kling"
	_ "studio/jobs/upstream/replicate"
	"studio/models"
	"studio/models/media"
	"studio/models/metrics"
	"studio/models/pglisten"
)

// Options tunes the asynchronous side of the service.
type Options struct {
	// Upstreams is the registry of upstream channels (the upstreams file, or the built-in ones).
	Upstreams *upstream.Registry
	// Media stores generated results.
	Media media.Store
	// MaxWorkers bounds the runs of the default queue at once in this process (default 50): picking image
	// jobs up, polls of image tasks, callbacks, e-mail, periodic work.
	MaxWorkers int
	// TaskWorkers bounds the runs of the video tasks' queue at once in this process (default 16).
	TaskWorkers int
	// CallbackBackoff is the delay before each callback retry (default 5 s, 30 s, 2 min, 10 min, 1 h).
	CallbackBackoff []time.Duration
	// ProbeInterval is the period of upstream probes (default 60 s).
	ProbeInterval time.Duration
	// SweepInterval is how often overdue jobs are failed and refunded (default 30 s).
	SweepInterval time.Duration
	// PollInterval is how often idle workers look for work when not woken (default 1 s on PostgreSQL, where inserts wake them, and 50 ms on SQLite).
	PollInterval time.Duration
	// RetryBase is the first routing back-off before retrying a transient upstream error (default 500 ms).
	RetryBase time.Duration
	// CallbackTimeout bounds one callback delivery (default 10 s).
	CallbackTimeout time.Duration
	// VideoPoll is how often a running video task is checked at its upstream when it may have ended
	// (default 5 s): in its first polls and near or past its tier's expected time (videoPollDelay).
	VideoPoll time.Duration
	// VideoPollMax is the longest wait between two polls of a video task far from its expected end
	// (default 30 s with the default VideoPoll, else VideoPoll: polls at a fixed interval).
	VideoPollMax time.Duration
	// ImagePoll is how often a running image task is checked at its upstream (default 2 s, or VideoPoll
	// when that is shorter): image tasks end in seconds, video tasks in minutes.
	ImagePoll time.Duration
	// Events tunes the event broker.
	Events events.Options
}

// Service is the asynchronous core: routing, the queue and its workers, the event broker and the chat
// relay, around the core (models.App) they are given to.
type Service struct {
	// App is the core, built by New with this service's queue, broker, binding check and router as its deps.
	App    *models.App
	Engine *routing.Engine
	// Events delivers the changes of jobs and video tasks; the caller starts and stops it (it runs
	// without the workers too).
	Events    *events.Broker
	relay     *relay.Relay
	media     media.Store
	queue     *Queue
	client    *http.Client // safe client for reference images
	callbacks *http.Client // safe client for callbacks: no redirects followed
	opts      Options
	started   bool
	draining  atomic.Bool
	// stopFollow ends the engine's following of upstream states (Engine.Follow).
	stopFollow context.CancelFunc
	stopping   atomic.Bool
	stores     chan struct{} // bounds the generated results being written to the media store at once
	inflight   *inflight     // the generations this process holds while they wait on upstreams
}

// StateFollow is how often an idle replica reloads the upstreams' states, so that a removal, a probe's
// restoration or an administrator's change reaches every replica within a second.
const StateFollow = 500 * time.Millisecond

// handBackDelay is how soon a job handed back by a stopping replica (handBack) may run again elsewhere.
const handBackDelay = time.Second

// handBack ends a run that was interrupted (this replica is stopping, or the run used its time budget
// while the job still has time) without failing the job: River snoozes it, which counts no attempt, and
// another replica (or this one after a restart) takes it up after handBackDelay.
func handBack(what, id string, cause error) error {
	slog.Info("handing work back to the queue", "work", what, "id", id, "cause", cause)
	return river.JobSnooze(handBackDelay)
}

// storeConcurrency is how many workers write a generated result to the media store at once, unless the
// store says otherwise (media.ParallelPuts: the local disk takes 16). The results are in memory; a
// handful of writes at a time keeps an object store busy, while a hundred at once (workers whose
// upstream answered together) only pile up and delay the requests being served meanwhile.
const storeConcurrency = 8

// putConcurrency is how many results are written to store at once.
func putConcurrency(store media.Store) int {
	if p, ok := store.(media.ParallelPuts); ok {
		if n := p.ParallelPuts(); n > 0 {
			return n
		}
	}
	return storeConcurrency
}

// Kinds of the periodic work, which the core does not queue (its kinds are models.WorkKind).
const (
	kindProbe  = "upstream_probe"
	kindSweep  = "job_sweep"
	kindRescue = "job_rescue"
)

// ImageJobArgs queues one image job. It holds the id alone: River indexes its arguments (GIN), and a
// copy of the job there cost PostgreSQL more than reading the row when the job runs.
type ImageJobArgs struct {
	JobID string `json:"job_id"`
}

// Kind names the work.
func (ImageJobArgs) Kind() string { return string(models.WorkImage) }

// CallbackArgs queues the delivery of one job's callback.
type CallbackArgs struct {
	JobID string `json:"job_id"`
}

// Kind names the work.
func (CallbackArgs) Kind() string { return string(models.WorkCallback) }

// MailArgs queues one e-mail, sealed by the core (models.App.DeliverQueuedMail opens it).
type MailArgs struct {
	Sealed string `json:"sealed"`
}

// Kind names the work.
func (MailArgs) Kind() string { return string(models.WorkMail) }

// mailAttempts bounds the deliveries of one e-mail: River's back-off spreads them over about an hour.
const mailAttempts = 8

// ProbeArgs is the periodic probe of removed upstreams.
type ProbeArgs struct{}

// Kind names the work.
func (ProbeArgs) Kind() string { return kindProbe }

// RescueArgs is the periodic pass that queues again the jobs of processes that died (inflight.go).
type RescueArgs struct{}

// Kind names the work.
func (RescueArgs) Kind() string { return kindRescue }

// SweepArgs is the periodic expiry of overdue jobs.
type SweepArgs struct{}

// Kind names the work.
func (SweepArgs) Kind() string { return kindSweep }

// New builds the asynchronous side and the core over an open, migrated database: the routing engine, the
// queue and its workers, the event broker, then the core (models.NewApp) with the queue, the broker and
// the binding check as its deps, and last the chat relay. The workers hold the Service and reach the
// core through it once New returns; nothing runs before Start.
func New(ctx context.Context, db *models.DB, cfg models.Config, opts Options) (*Service, error) {
	if opts.MaxWorkers <= 0 {
		opts.MaxWorkers = 50
	}
	if opts.TaskWorkers <= 0 {
		opts.TaskWorkers = 16
	}
	if len(opts.CallbackBackoff) == 0 {
		opts.CallbackBackoff = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, time.Hour}
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = time.Minute
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = 30 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
		if db.Dialect == models.SQLite {
			opts.PollInterval = 50 * time.Millisecond
		}
	}
	if opts.VideoPoll <= 0 {
		opts.VideoPoll = 5 * time.Second
		if opts.VideoPollMax <= 0 {
			opts.VideoPollMax = 30 * time.Second
		}
	}
	opts.VideoPollMax = max(opts.VideoPollMax, opts.VideoPoll)
	if opts.ImagePoll <= 0 {
		opts.ImagePoll = min(2*time.Second, opts.VideoPoll)
	}
	if opts.CallbackTimeout <= 0 {
		opts.CallbackTimeout = 10 * time.Second
	}
	s := &Service{media: opts.Media, opts: opts, stores: make(chan struct{}, putConcurrency(opts.Media)),
		client:    media.NewSafeClient(cfg.AllowPrivateURLs, media.WithTimeout(30*time.Second)),
		callbacks: media.NewSafeClient(cfg.AllowPrivateURLs, media.WithTimeout(opts.CallbackTimeout))}
	// A callback is delivered to the URL the caller gave: a redirect is an answer that is not 2xx (retried),
	// never followed, so that a receiver cannot bounce the signed body elsewhere.
	s.callbacks.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.Engine = routing.NewEngine(opts.Upstreams, routing.Options{Store: NewHealthStore(db), RetryBase: opts.RetryBase,
		Logger: slog.Default().With("component", "routing")})

	workers := river.NewWorkers()
	river.AddWorker(workers, &imageWorker{s: s})
	river.AddWorker(workers, &videoWorker{s: s})
	river.AddWorker(workers, &callbackWorker{s: s})
	river.AddWorker(workers, &probeWorker{s: s})
	river.AddWorker(workers, &mailWorker{s: s})
	river.AddWorker(workers, &sweepWorker{s: s})
	river.AddWorker(workers, &rescueWorker{s: s})
	periodic := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(opts.ProbeInterval), func() (river.JobArgs, *river.InsertOpts) {
			return ProbeArgs{}, &river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: opts.ProbeInterval}}
		}, nil),
		river.NewPeriodicJob(river.PeriodicInterval(opts.SweepInterval), func() (river.JobArgs, *river.InsertOpts) {
			return SweepArgs{}, &river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: opts.SweepInterval}}
		}, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(rescueInterval), func() (river.JobArgs, *river.InsertOpts) {
			return RescueArgs{}, &river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: rescueInterval}}
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
	q, err := NewQueue(ctx, db, QueueConfig{Workers: workers, Periodic: periodic, MaxWorkers: opts.MaxWorkers, TaskWorkers: opts.TaskWorkers,
		JobTimeout: JobTimeout, RescueAfter: RescueAfter, PollInterval: opts.PollInterval})
	if err != nil {
		return nil, err
	}
	s.queue = q
	s.inflight = newInflight(s)
	metrics.ObservePools(func() []metrics.Pool { return poolFigures(db, q) })
	if opts.Events.MaxPerIdentity <= 0 {
		opts.Events.MaxPerIdentity = cfg.MaxSubscriptionsPerIdentity
	}
	// On PostgreSQL one listener connection carries the broker's events and the core's credential
	// changes (models/pglisten); on SQLite nothing listens.
	var listener *pglisten.Listener
	if db.Dialect == models.Postgres {
		if listener = opts.Events.Listener; listener == nil {
			listener = models.NewListener(db, pglisten.Options{RetryMax: opts.Events.RetryMax})
			opts.Events.Listener = listener
		}
	}
	s.Events = events.New(db, opts.Events)
	s.App, err = models.NewApp(ctx, db, cfg, models.Deps{Queue: workQueue{s}, Events: s.Events, Bindings: bindings{opts.Upstreams},
		Router: router{s}, Follower: s.Events, Process: s, Holder: s.inflight, Listener: listener})
	if err != nil {
		return nil, err
	}
	s.relay = relay.New(s.App, s.Engine)
	return s, nil
}

// Crash recovery without writing River's tables (README: Running in production, Crash recovery). River
// cancels a run at its worker's Timeout, and its rescuer, on the elected leader every 30 s, runs a job
// again only once it has been running longer than both RescueAfter and that Timeout. A live run has ended
// by then (done, failed, or handed back with a snooze), so it is never run a second time meanwhile; the
// run of a replica that died is taken up once its bound has passed and the rescuer looks: within 15-45 s
// for a poll of a provider's task (waitBudget), a callback or the like, within 50-80 s for a run that
// calls an upstream itself (RunBudget). The generations a process holds outside the queue have their own
// recovery (inflight.go): they are queued again once the process stops beating.
const (
	// JobTimeout bounds one run of work whose worker sets no Timeout (every worker here sets one).
	JobTimeout = 10 * time.Second
	// RescueAfter is River's RescueStuckJobsAfter (River requires it to be at least JobTimeout).
	RescueAfter = 15 * time.Second
	// RunBudget bounds one run of the queue that calls an upstream itself (half the job deadline when that
	// is shorter): a video's submission, a result's download. An image generation's call is not made in
	// a run of the queue but in a goroutine that holds the job (inflight.go), bounded by its deadline only.
	// Work that waits snoozes instead of holding a run (waitAgain), and a run that used its budget hands
	// the job back (handBack) while the job has time left.
	RunBudget = 45 * time.Second
	// runMargin is how long after a run's own budget River cancels it and its rescuer may take the job:
	// time for a run cut at its budget to hand the job back.
	runMargin = 5 * time.Second
	// periodicTimeout bounds a pass of upstream probes or of the deadline sweep. Each runs once
	// (MaxAttempts 1): rescuing the pass of a leader that died only discards it, and the next period's
	// pass runs anyway.
	periodicTimeout = 5 * time.Minute
)

// attemptBudget is the longest one run of a job may take: RunBudget, or half the job's deadline when that
// is shorter, so that the work of a replica that died is rescued and run again within about a minute and
// while the job still has time left.
func attemptBudget(deadline time.Duration) time.Duration { return min(deadline/2, RunBudget) }

// bindings is the core's models.BindingChecker: the upstream registry.
type bindings struct{ reg *upstream.Registry }

// CheckBinding accepts a model family or channel name of the current upstreams.
func (b bindings) CheckBinding(model string) error {
	set := b.reg.Current()
	if set.ByName(model) != nil || set.HasFamily(upstream.MediaImage, model) || set.HasFamily(upstream.MediaVideo, model) || set.HasFamily(upstream.MediaChat, model) {
		return nil
	}
	return models.Invalid("unknown model family or channel %q", model)
}

// Start starts the workers of this process. They run until Stop: the end of ctx (a signal, say) does not
// cancel the jobs being worked on, so that Stop can let them finish.
func (s *Service) Start(ctx context.Context) error {
	// Every job's context derives from this one: the workers' statements use the work pool.
	follow, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	s.stopFollow = stopFollow
	go s.Engine.Follow(models.WorkContext(follow), StateFollow)
	if err := s.inflight.start(models.WorkContext(follow)); err != nil {
		stopFollow()
		return fmt.Errorf("jobs: announce this process: %w", err)
	}
	if err := s.queue.Start(models.WorkContext(context.WithoutCancel(ctx))); err != nil {
		return fmt.Errorf("jobs: start queue: %w", err)
	}
	s.started = true
	return nil
}

// Running reports whether this process's workers run.
func (s *Service) Running() bool { return s.started }

// Drain marks this replica as stopping: /api/ready answers 503 from now on, so that a balancer sends it
// no new requests while it finishes the ones it has (cmd/studio serve, on SIGTERM).
func (s *Service) Drain() { s.draining.Store(true) }

// Draining reports whether Drain was called.
func (s *Service) Draining() bool { return s.draining.Load() }

// Stop stops taking new work and lets the running work finish until ctx ends (the shutdown grace);
// then it cancels what still runs, and each such run hands its job back to the queue without failing
// it (handBack), for another replica to take up: a job following a provider's task resumes polling the
// same task; only a synchronous provider call cut off here is made again.
func (s *Service) Stop(ctx context.Context) error {
	if !s.stopping.CompareAndSwap(false, true) {
		return nil // stopped already (serve stops the workers first, then the whole service)
	}
	err := s.queue.Stop(ctx)
	s.inflight.stop(ctx)
	if s.stopFollow != nil {
		s.stopFollow()
	}
	s.started = false
	_ = s.Engine.Flush(context.WithoutCancel(ctx))
	return err
}

// probeWorker restores removed upstreams whose probe succeeds; it runs on the elected leader only.
type probeWorker struct {
	river.WorkerDefaults[ProbeArgs]
	s *Service
}

func (w *probeWorker) Work(ctx context.Context, job *river.Job[ProbeArgs]) error {
	restored, err := w.s.Engine.ProbeRemoved(ctx)
	if restored > 0 {
		slog.Info("upstreams restored by probe", "count", restored)
	}
	return err
}

// mailWorker sends one queued e-mail; a mail server that is down is tried again with River's back-off.
type mailWorker struct {
	river.WorkerDefaults[MailArgs]
	s *Service
}

func (w *mailWorker) Work(ctx context.Context, job *river.Job[MailArgs]) error {
	err := w.s.App.Auth().DeliverQueuedMail(ctx, job.Args.Sealed)
	if models.KindOf(err) == models.KindInvalid {
		slog.Error("queued e-mail dropped", "err", err)
		return river.JobCancel(err)
	}
	if err != nil {
		slog.Warn("e-mail not sent; will retry", "attempt", job.Attempt, "err", err)
	}
	return err
}

// rescueWorker queues again the jobs held by processes that died; it runs on the elected leader only.
type rescueWorker struct {
	river.WorkerDefaults[RescueArgs]
	s *Service
}

func (w *rescueWorker) Work(ctx context.Context, job *river.Job[RescueArgs]) error {
	n, err := w.s.App.Runners().RescueOrphans(ctx)
	if n > 0 {
		slog.Warn("jobs of a process that stopped beating queued again", "count", n)
	}
	return err
}

// Timeout bounds one rescue pass.
func (w *rescueWorker) Timeout(*river.Job[RescueArgs]) time.Duration { return periodicTimeout }

// sweepWorker fails and refunds jobs that passed their deadline, whatever happened to their worker.
type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	s *Service
}

func (w *sweepWorker) Work(ctx context.Context, job *river.Job[SweepArgs]) error {
	d := w.s.App.Config.JobDeadline
	n, err := w.s.App.Jobs().ExpireOverdueJobs(ctx, d/5+2*time.Second)
	if n > 0 {
		slog.Warn("overdue jobs failed and refunded", "count", n)
	}
	if err != nil {
		return err
	}
	if pruned, err := w.s.App.PruneExpired(ctx); err != nil {
		return err
	} else if pruned > 0 {
		slog.Info("expired rows pruned", "count", pruned)
	}
	return nil
}
