// Package server wires the core, the workers and every surface into one service; cmd/studio runs it and
// the HTTP tests of every surface start it in-process.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gorilla/mux"

	"studio/cmd/server/httpmw"
	"studio/graph"
	"studio/jobs"
	"studio/jobs/events"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/media"
	"studio/rest"
	"studio/web"
)

// Service is a running studio: the database, the core, the workers and the HTTP handler of every surface.
type Service struct {
	DB        *models.DB
	App       *models.App
	Jobs      *jobs.Service
	Events    *events.Broker
	Media     media.Store
	Upstreams *upstream.Registry
	handler   http.Handler
	leave     func() // leaves the replicas (models.JoinReplicas)
}

// Options are the parts of the service that come from the command tree or from tests.
type Options struct {
	CLIGuide any
	// Jobs tunes the workers (tests shorten back-offs and intervals); Upstreams and Media are filled in.
	Jobs jobs.Options
	// Upstreams replaces the upstream configuration (tests); nil reads SERVICE_UPSTREAMS or the built-ins.
	Upstreams []upstream.Config
}

// Open opens and migrates the database (core and queue) and builds the service, without starting workers.
func Open(ctx context.Context, cfg models.Config, opts Options) (*Service, error) {
	db, err := models.OpenDBConns(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		return nil, err
	}
	if err := models.Migrate(ctx, db, jobs.MigrateQueue(db)); err != nil {
		db.Close()
		return nil, err
	}
	s, err := New(ctx, db, cfg, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// New builds the service over an open, migrated database: jobs.New builds the core (models.App) with
// its queue, event broker and binding check.
func New(ctx context.Context, db *models.DB, cfg models.Config, opts Options) (*Service, error) {
	s := &Service{DB: db}
	var err error
	cfgs := opts.Upstreams
	if cfgs == nil {
		if cfg.Upstreams != "" {
			if cfgs, err = upstream.LoadFile(cfg.Upstreams); err != nil {
				return nil, err
			}
		} else {
			cfgs = upstream.BuiltinUpstreams()
		}
	}
	if s.Upstreams, err = upstream.NewRegistry(cfgs); err != nil {
		return nil, err
	}
	if s.Media, err = openMedia(ctx, cfg); err != nil {
		return nil, err
	}
	jo := opts.Jobs
	jo.Upstreams, jo.Media = s.Upstreams, s.Media
	if jo.MaxWorkers == 0 {
		jo.MaxWorkers = cfg.Workers
	}
	if s.Jobs, err = jobs.New(ctx, db, cfg, jo); err != nil {
		return nil, err
	}
	s.App, s.Events = s.Jobs.App, s.Jobs.Events
	jobs.RegisterAdmin(s.App.Admin, s.Jobs)
	return s, nil
}

// openMedia returns the S3-compatible store when configured, else the local disk under SERVICE_DATA_DIR/media.
func openMedia(ctx context.Context, cfg models.Config) (media.Store, error) {
	if cfg.S3Endpoint != "" {
		st, err := media.NewS3(media.S3Config{Endpoint: cfg.S3Endpoint, Bucket: cfg.S3Bucket, Region: cfg.S3Region,
			AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey, PublicURL: cfg.CDNURL, TempDir: filepath.Join(cfg.DataDir, "tmp")})
		if err != nil {
			return nil, fmt.Errorf("media: %w", err)
		}
		return st, nil
	}
	st, err := media.NewLocal(filepath.Join(cfg.DataDir, "media"), cfg.CDNURL)
	if err != nil {
		return nil, fmt.Errorf("media: %w", err)
	}
	return st, nil
}

// ReloadUpstreams re-reads SERVICE_UPSTREAMS; an invalid file is rejected and the running set kept.
func (s *Service) ReloadUpstreams() error {
	if s.App.Config.Upstreams == "" {
		return nil
	}
	if err := s.Upstreams.Reload(s.App.Config.Upstreams); err != nil {
		return err
	}
	slog.Info("upstreams reloaded", "path", s.App.Config.Upstreams)
	return nil
}

// Handler builds (once) the HTTP handler of every surface.
func (s *Service) Handler(opts Options) http.Handler {
	if s.handler != nil {
		return s.handler
	}
	r := mux.NewRouter()
	ro := rest.Options{CLIGuide: opts.CLIGuide, Media: s.Media}
	if s.App.Config.MetricsAddr == "" {
		ro.Metrics = s.MetricsHandler()
	}
	if l, ok := s.Media.(*media.Local); ok {
		ro.MediaHandler = l.Handler()
	}
	rest.New(s.Jobs.App, ro).Register(r)
	r.Handle(graph.Path, graph.NewHandler(s.Jobs.App, graph.Options{}))
	web.New(s.Jobs.App).Register(r)
	web.NewConsole(s.Jobs.App, web.ConsoleOptions{Media: s.Media}).Register(r)
	s.handler = s.withMiddleware(r)
	return s.handler
}

// NewHTTPServer returns the HTTP server of the main address with its settings (time-outs, header size),
// shared by studio serve and the benchmarks that start studio.
func NewHTTPServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// MetricsHandler serves the Prometheus metrics of this service (for SERVICE_METRICS_ADDR or /metrics).
func (s *Service) MetricsHandler() http.Handler {
	return httpmw.MetricsHandler(jobs.NewCollector(s.Jobs))
}

// Start announces the replica (refusing to join others when media are on a local disk: models
// JoinReplicas) and starts the background workers and the delivery of job events. They run until
// Stop, whatever becomes of ctx (a signal ends serve's context, and Stop then lets running work finish).
func (s *Service) Start(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	kind := "s3"
	if _, local := s.Media.(*media.Local); local {
		kind = "local"
	}
	host, _ := os.Hostname()
	dir, _ := filepath.Abs(s.App.Config.DataDir)
	leave, err := s.App.JoinReplicas(ctx, models.ReplicaID(host, dir), kind, s.App.Config.MediaShared)
	if err != nil {
		return err
	}
	s.leave = leave
	if err := s.Events.Start(ctx); err != nil {
		return err
	}
	return s.Jobs.Start(ctx)
}

// Stop stops the workers, letting running work finish or be rescued later, and writes batched counters.
func (s *Service) Stop(ctx context.Context) error {
	err := s.Jobs.Stop(ctx)
	if s.leave != nil {
		s.leave()
		s.leave = nil
	}
	s.Events.Stop()
	if ferr := s.App.Credits().FlushUsage(ctx); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

// Close closes the database.
func (s *Service) Close() { s.DB.Close() }
