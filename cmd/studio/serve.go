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
	"studio/graph"
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
			// SIGTERM (a process manager, a rolling restart) drains for SERVICE_DRAIN_WINDOW; Ctrl-C at a
			// terminal stops without waiting for a balancer that is not there.
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			go func() {
				if s := <-sigs; s == os.Interrupt {
					cfg.DrainWindow = 0
				}
				stop()
			}()
			return serve(ctx, &cfg, c.Root())
		},
	}
	addConfigFlags(cmd.Flags())
	return cmd
}

// serve runs the HTTP server until ctx ends, then drains in-flight requests and stops the workers. It
// takes its listen addresses first, so that a busy port fails before the database is created or an
// administrator key is generated and shown.
func serve(ctx context.Context, cfg *models.Config, root *cobra.Command) error {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (SERVICE_ADDR / --addr): %w", cfg.Addr, err)
	}
	defer ln.Close()
	var mln net.Listener
	if cfg.MetricsAddr != "" {
		if mln, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("listen on %s (SERVICE_METRICS_ADDR / --metrics-addr): %w", cfg.MetricsAddr, err)
		}
		defer mln.Close()
	}
	svc, err := server.Open(ctx, *cfg, server.Options{})
	if err != nil {
		return err
	}
	defer svc.Close()
	if key, err := svc.App.Auth().EnsureAdminKey(ctx); err != nil {
		return err
	} else if key != "" {
		fmt.Fprintf(os.Stderr, "\n  Platform administrator key (shown once, store it now):\n\n    %s\n", key)
	}
	fmt.Fprint(os.Stderr, addressesText(cfg.BaseURL))
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
	if mln != nil {
		msrv := &http.Server{Handler: svc.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
		slog.Info("metrics serving", "addr", mln.Addr().String())
	}
	srv := server.NewHTTPServer(handler)
	slog.Info("studio serving", "addr", ln.Addr().String(), "base_url", cfg.BaseURL, "database", string(svc.DB.Dialect), "version", version)
	server.TuneGC(ctx)
	// From here on log lines (the access log above all) are written together, at least every 100 ms.
	stopLog := server.BufferLog(os.Stderr, 100*time.Millisecond)
	defer stopLog()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown(srv, svc, *cfg)
	return nil
}

// shutdown stops a replica without losing a request or running work twice: /api/ready answers 503 at
// once, so that a balancer stops sending; the workers stop taking jobs and finish the ones they run
// within SERVICE_SHUTDOWN_GRACE (what is left after it is handed back to the queue, for another replica
// to take up); the listener stays open for SERVICE_DRAIN_WINDOW, then closes and the requests and
// streams in flight finish (30 s at most); last the event delivery stops and counters are written.
func shutdown(srv *http.Server, svc *server.Service, cfg models.Config) {
	svc.Jobs.Drain()
	slog.Info("shutting down: /api/ready answers 503; finishing requests and running jobs",
		"drain_window", cfg.DrainWindow.String(), "shutdown_grace", cfg.ShutdownGrace.String())
	workers := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		workers <- svc.Jobs.Stop(ctx)
	}()
	time.Sleep(cfg.DrainWindow)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Warn("shutdown", "err", err)
	}
	if err := <-workers; err != nil {
		slog.Warn("stopping workers", "err", err)
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelStop()
	if err := svc.Stop(stopCtx); err != nil {
		slog.Warn("stopping", "err", err)
	}
	slog.Info("stopped")
}

// addressesText lists where a person starts: the console, the GraphQL endpoint, the OpenAPI document
// and the health check, under the public base URL.
func addressesText(base string) string {
	return fmt.Sprintf("\n  Console:  %s/login\n  GraphQL:  %s%s\n  OpenAPI:  %s/api/openapi.json\n  Health:   %s/api/health\n\n",
		base, base, graph.Path, base, base)
}
