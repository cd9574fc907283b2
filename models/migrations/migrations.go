// Package migrations holds the versioned SQL of the schema, applied by goose at start (models.Migrate).
//
// Each dialect has its own folder of numbered files (sqlite/, postgres/): a change of the schema is a new
// file with the next number in both, written out as SQL, and a released file is never edited, so a fresh
// database and an upgraded one end alike. Version 1 is the schema as released before goose.
//
// legacy/ holds the steps 2 to 7 of the numbering before goose (the table schema_migrations), frozen as
// SQL: a database deployed at one of those versions runs the steps it lacks, and is then at version 1.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed sqlite/*.sql postgres/*.sql legacy/sqlite/*.sql legacy/postgres/*.sql
var files embed.FS

// Dialects are the names of the folders, one per database engine.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// FS returns the goose migrations of a dialect (files NNNNN_name.sql at its root).
func FS(dialect string) (fs.FS, error) {
	if dialect != SQLite && dialect != Postgres {
		return nil, fmt.Errorf("migrations: no dialect %q", dialect)
	}
	return fs.Sub(files, dialect)
}

// LegacyLast is the last version of the numbering before goose: steps 1 to 7 were released.
const LegacyLast = 7

// LegacyStep returns the frozen SQL of step version (2..7) of the numbering before goose for a dialect;
// it ends by recording the step in schema_migrations.
func LegacyStep(dialect string, version int) (string, error) {
	if version < 2 || version > LegacyLast {
		return "", fmt.Errorf("migrations: no frozen step %d", version)
	}
	b, err := files.ReadFile(fmt.Sprintf("legacy/%s/%d.sql", dialect, version))
	if err != nil {
		return "", fmt.Errorf("migrations: step %d: %w", version, err)
	}
	return string(b), nil
}
