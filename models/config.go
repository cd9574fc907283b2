package models

import (
	"fmt"

	"studio/models/config"
)

// The configuration is infrastructure (models/config); the core and its callers name it here.
type (
	// Config is the service configuration of decision D2.
	Config = config.Config
	// ConfigVar is one setting: its environment variable, flag, default and help.
	ConfigVar = config.ConfigVar
)

// ConfigVars lists every setting, in the order of the help.
var ConfigVars = config.ConfigVars

// LoadConfig builds a Config from a lookup function (environment or flags, flags winning) and validates it.
// An administrator key given in SERVICE_ADMIN_KEY must have the core's key format.
func LoadConfig(lookup func(v ConfigVar) (string, bool)) (Config, error) {
	c, err := config.LoadConfig(lookup)
	if err == nil && c.AdminKey != "" && !ValidKeyFormat(c.AdminKey) {
		err = fmt.Errorf("config: SERVICE_ADMIN_KEY: want sk-studio- followed by 24 letters or digits")
	}
	return c, err
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() Config { return config.DefaultConfig() }

// ParseDatabaseURL splits DATABASE_URL into its dialect and the driver's DSN.
func ParseDatabaseURL(raw string) (dialect, dsn string, err error) {
	return config.ParseDatabaseURL(raw)
}
