package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gorilla/mux"
	"github.com/spf13/cobra"

	"studio/models"
	"studio/rest"
)

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the server: REST API, GraphQL, console, claim pages and workers",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := loadConfig(c.Flags())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, cfg, c.Root())
		},
	}
	addConfigFlags(cmd.Flags())
	return cmd
}

// service is everything `studio serve` and `studio admin` open: the database and the core.
type service struct {
	DB  *models.DB
	App *models.App
}

func (s *service) Close() { s.DB.Close() }

// openService opens and migrates the database and builds the core.
func openService(ctx context.Context, cfg models.Config) (*service, error) {
	db, err := models.OpenDB(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := models.Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	app, err := models.NewApp(ctx, db, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &service{DB: db, App: app}, nil
}

// serve runs the HTTP server until ctx ends, then drains in-flight requests and stops the workers.
func serve(ctx context.Context, cfg models.Config, root *cobra.Command) error {
	svc, err := openService(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	if key, err := svc.App.EnsureAdminKey(ctx); err != nil {
		return err
	} else if key != "" {
		fmt.Fprintf(os.Stderr, "\n  Platform administrator key (shown once, store it now):\n\n    %s\n\n", key)
	}
	handler, err := buildHandler(svc, root)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	slog.Info("studio serving", "addr", ln.Addr().String(), "base_url", cfg.BaseURL, "database", string(svc.DB.Dialect), "version", version)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	slog.Info("shutting down: draining requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Warn("shutdown", "err", err)
	}
	slog.Info("stopped")
	return nil
}

// buildHandler wires every surface onto one router.
func buildHandler(svc *service, root *cobra.Command) (http.Handler, error) {
	media := http.FileServer(http.Dir(filepath.Join(svc.App.Config.DataDir, "media")))
	r := mux.NewRouter()
	rest.New(svc.App, rest.Options{CLIGuide: cliGuide(root), Media: media}).Register(r)
	return rest.Middleware(r), nil
}
