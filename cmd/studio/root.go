package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"studio/models"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// exitError carries a process exit code for scripts.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the process exit code of a command's error: an exitError's code, the code of the HTTP
// status of a server's answer (see client.go), else 1.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.exitCode()
	}
	return exitUsage
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "studio",
		Short:         "studio: multi-tenant creative generation gateway and its command-line client",
		Long:          rootLong(),
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddGroup(&cobra.Group{ID: groupClient, Title: "Client commands (talk to a server over HTTP; SERVICE_BASE_URL, SERVICE_API_KEY):"},
		&cobra.Group{ID: groupServer, Title: "Server commands (run against the configuration and database):"})
	serve, admin := newServeCmd(), newAdminCmd()
	serve.GroupID, admin.GroupID = groupServer, groupServer
	root.AddCommand(serve, admin)
	root.AddCommand(newLoginCmd(), newLogoutCmd(), newWhoamiCmd(), newBalanceCmd(), newGenerateCmd(), newJobsCmd(),
		newUploadCmd(), newTemplatesCmd(), newVideoCmd(), newCopyCmd())
	return root
}

// rootLong is the root command's help: what the binary is and the client's exit codes.
func rootLong() string {
	var b strings.Builder
	b.WriteString("studio: multi-tenant creative generation gateway and its command-line client.\n\n" +
		"`studio serve` runs the server; the client commands talk to a server at SERVICE_BASE_URL\n" +
		"(default " + defaultBaseURL + ") with SERVICE_API_KEY or the login stored by `studio login`.\n\n" +
		"Exit codes of the client commands:\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "  %d  %s\n", e.Code, e.Meaning)
	}
	return b.String()
}

// addConfigFlags gives a command one flag per configuration variable of D2, or only the named ones.
func addConfigFlags(fs *pflag.FlagSet, only ...string) {
	for _, v := range models.ConfigVars {
		if len(only) > 0 && !slices.Contains(only, v.Flag) {
			continue
		}
		fs.String(v.Flag, "", v.Usage+" (env "+v.Env+", default "+orNone(v.Default)+")")
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// loadConfig reads the configuration: a flag wins over the environment, which wins over the default.
func loadConfig(fs *pflag.FlagSet) (models.Config, error) {
	return models.LoadConfig(func(v models.ConfigVar) (string, bool) {
		if f := fs.Lookup(v.Flag); f != nil && f.Changed {
			return f.Value.String(), true
		}
		if val, ok := os.LookupEnv(v.Env); ok && strings.TrimSpace(val) != "" {
			return val, true
		}
		return "", false
	})
}
