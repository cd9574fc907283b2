package models

import (
	"context"

	"studio/models/migrations"
)

// MigrateTo brings a fresh database to the given version of models/migrations only (tests compare what
// each version gives).
func MigrateTo(ctx context.Context, db *DB, version int64) error {
	fsys, err := migrations.FS(string(db.Dialect))
	if err != nil {
		return err
	}
	return gooseUp(ctx, db, fsys, version)
}
