package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"studio/cmd/server"
	"studio/jobs"
	"studio/jobs/upstream"
	"studio/models"
)

// newAdminCmd builds `studio admin <action>` from the same action list that POST /api/admin dispatches.
func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "run a platform administration action directly against the database",
	}
	addConfigFlags(cmd.PersistentFlags(), adminConfigFlags...)
	// The action list needs no database: build it from an App without one, just to read names and params.
	for _, action := range adminActionCatalogue() {
		action := action
		sub := &cobra.Command{
			Use:   action.Name,
			Short: action.Summary,
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				body := map[string]any{"action": action.Name}
				for _, p := range action.Params {
					f := c.Flags().Lookup(p.Name)
					if !f.Changed {
						if p.Required {
							return fmt.Errorf("--%s is required", p.Name)
						}
						continue
					}
					v, err := parseParam(p, f.Value.String())
					if err != nil {
						return fmt.Errorf("--%s: %v", p.Name, err)
					}
					body[p.Name] = v
				}
				return runAdmin(c, body)
			},
		}
		for _, p := range action.Params {
			sub.Flags().String(p.Name, "", p.Usage)
		}
		cmd.AddCommand(sub)
	}
	cmd.AddCommand(newUpstreamTestCmd())
	return cmd
}

// newUpstreamTestCmd builds `studio admin upstream-test NAME`: it checks one configured upstream's key
// and reachability with the protocol's probe (a listing or a model lookup, never a generation), so that
// an operator can try a new upstreams file before serving with it. It needs no database.
func newUpstreamTestCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "upstream-test NAME",
		Short: "check an upstream's key and reachability without generating anything",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := loadConfig(c.Flags())
			if err != nil {
				return err
			}
			cfgs := upstream.BuiltinUpstreams()
			if cfg.Upstreams != "" {
				if cfgs, err = upstream.LoadFile(cfg.Upstreams); err != nil {
					return err
				}
			}
			return upstreamTest(c.Context(), c.OutOrStdout(), cfgs, args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 20*time.Second, "how long to wait for the upstream")
	return cmd
}

// upstreamTest probes the upstream called name and prints the outcome as JSON; a failed probe is an
// error naming its class (revoked, unpaid, transient, ...).
func upstreamTest(ctx context.Context, w io.Writer, cfgs []upstream.Config, name string, timeout time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	set, err := upstream.NewSet(cfgs)
	if err != nil {
		return err
	}
	u := set.ByName(name)
	if u == nil {
		var names []string
		for _, x := range set.All {
			names = append(names, x.Name)
		}
		return fmt.Errorf("no upstream named %q (configured: %s)", name, strings.Join(names, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err = u.Probe(ctx)
	out := map[string]any{"ok": err == nil, "name": u.Name, "provider": u.Provider, "protocol": u.Protocol, "media": u.Media,
		"base_url": u.BaseURL, "latency_ms": time.Since(start).Milliseconds()}
	if err != nil {
		out["class"] = string(upstream.ClassOf(err))
		out["error"] = err.Error()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if encErr := enc.Encode(out); encErr != nil {
		return encErr
	}
	if err != nil {
		return fmt.Errorf("upstream %s failed its check (%s)", u.Name, upstream.ClassOf(err))
	}
	return nil
}

func parseParam(p models.AdminParam, s string) (any, error) {
	switch p.Type {
	case "int":
		return strconv.ParseInt(s, 10, 64)
	case "float":
		return strconv.ParseFloat(s, 64)
	case "bool":
		return strconv.ParseBool(s)
	}
	return s, nil
}

// adminConfigFlags are the configuration flags an administrator action uses: where the database, the
// data and the upstreams file are, and the service secret. The other variables still apply from the
// environment, but they only matter to a running server, so `studio admin --help` does not list them.
var adminConfigFlags = []string{"database-url", "data-dir", "upstreams", "secret"}

func runAdmin(c *cobra.Command, body map[string]any) error {
	cfg, err := loadConfig(c.Flags())
	if err != nil {
		return err
	}
	// An action prints its answer on stdout; the service's informational logs (migrations, the queue
	// starting in poll mode) are a running server's business, so only warnings and errors are shown.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx := context.Background()
	svc, err := server.Open(ctx, cfg, server.Options{})
	if err != nil {
		return err
	}
	defer svc.Close()
	raw, _ := json.Marshal(body)
	out, err := svc.App.Admin.Run(ctx, models.Operator(), raw)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// adminActionCatalogue lists the administrator actions for the command tree, from an App with no database.
func adminActionCatalogue() []models.AdminAction {
	reg := models.NewAdminActions(nil)
	jobs.RegisterAdmin(reg, nil)
	return reg.List()
}
