// Package server wires the core, the workers and every surface into one service; cmd/studio runs it and
// the HTTP tests of every surface start it in-process.
package server

import (
	"context"
	"net/http"
	"path/filepath"

	"github.com/gorilla/mux"

	"studio/models"
	"studio/rest"
)

// Service is a running studio: the database, the core and the HTTP handler of every surface.
type Service struct {
	DB      *models.DB
	App     *models.App
	handler http.Handler
}

// Options are the parts of the service that come from the command tree.
type Options struct {
	CLIGuide any
}

// Open opens and migrates the database and builds the core, without starting workers or HTTP.
func Open(ctx context.Context, cfg models.Config) (*Service, error) {
	db, err := models.OpenDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := models.Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return New(ctx, db, cfg)
}

// New builds the service over an open, migrated database.
func New(ctx context.Context, db *models.DB, cfg models.Config) (*Service, error) {
	app, err := models.NewApp(ctx, db, cfg)
	if err != nil {
		return nil, err
	}
	return &Service{DB: db, App: app}, nil
}

// Handler builds (once) the HTTP handler of every surface.
func (s *Service) Handler(opts Options) http.Handler {
	if s.handler != nil {
		return s.handler
	}
	media := http.FileServer(http.Dir(filepath.Join(s.App.Config.DataDir, "media")))
	r := mux.NewRouter()
	rest.New(s.App, rest.Options{CLIGuide: opts.CLIGuide, Media: media}).Register(r)
	s.handler = rest.Middleware(r)
	return s.handler
}

// Start starts the background workers.
func (s *Service) Start(ctx context.Context) error { return nil }

// Stop stops the workers, letting running work finish or be rescued later.
func (s *Service) Stop(ctx context.Context) error { return nil }

// Close closes the database.
func (s *Service) Close() { s.DB.Close() }
