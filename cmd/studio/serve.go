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
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"studio/cmd/server"
	"studio/models"
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

// serve runs the HTTP server until ctx ends, then drains in-flight requests and stops the workers.
func serve(ctx context.Context, cfg models.Config, root *cobra.Command) error {
	svc, err := server.Open(ctx, cfg, server.Options{})
	if err != nil {
		return err
	}
	defer svc.Close()
	if key, err := svc.App.EnsureAdminKey(ctx); err != nil {
		return err
	} else if key != "" {
		fmt.Fprintf(os.Stderr, "\n  Platform administrator key (shown once, store it now):\n\n    %s\n\n", key)
	}
	handler := svc.Handler(server.Options{CLIGuide: cliGuide(root)})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if err := svc.ReloadUpstreams(); err != nil {
				slog.Error("upstreams file rejected; keeping the running set", "err", err)
			}
		}
	}()
	if err := svc.Start(ctx); err != nil {
		return err
	}
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on SERVICE_METRICS_ADDR %s: %w", cfg.MetricsAddr, err)
		}
		msrv := &http.Server{Handler: svc.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
		slog.Info("metrics serving", "addr", mln.Addr().String())
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
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStop()
	if err := svc.Stop(stopCtx); err != nil {
		slog.Warn("stopping workers", "err", err)
	}
	slog.Info("stopped")
	return nil
}
