package main

import (
	"errors"
	"os"
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

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "studio",
		Short:         "studio: multi-tenant creative generation gateway and its command-line client",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newAdminCmd())
	return root
}

// addConfigFlags gives a command one flag per configuration variable of D2.
func addConfigFlags(fs *pflag.FlagSet) {
	for _, v := range models.ConfigVars {
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
