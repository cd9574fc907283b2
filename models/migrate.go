package models

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
)

// Migration is one forward-only schema step.
type Migration struct {
	Version int
	Name    string
	Up      func(tx *gorm.DB) error
}

// Migrations is the ordered list of schema steps; append, never edit a released one.
var Migrations = []Migration{
	{1, "initial schema", func(tx *gorm.DB) error { return tx.AutoMigrate(AllEntities()...) }},
	{2, "console sessions remember the hash of their key", func(tx *gorm.DB) error { return tx.AutoMigrate(&Session{}) }},
	{3, "open jobs and video tasks are found through partial indexes", openWorkIndexes},
	{4, "an upstream attempt row counts alike calls and names the process that made them", func(tx *gorm.DB) error { return tx.AutoMigrate(&UpstreamAttempt{}) }},
	{5, "login tokens carry a version that ends them; e-mailed codes count wrong attempts; logins of claimed accounts end", endClaimedLogins},
	{6, "submissions to upstream task protocols are recorded before they leave", migrateUpstreamTasks},
	{7, "replicas announce themselves (a replica with local media refuses to join others)", func(tx *gorm.DB) error { return tx.AutoMigrate(&Replica{}) }},
}

// endClaimedLogins adds users.token_version and email_codes.attempts, then ends every login of each
// account that a claim code was redeemed for. Before this version a redemption returned a 24-hour login
// token for any e-mail, also for an account that existed before it (decisions D8, rewritten): such a
// token, and whatever was opened with it (console sessions, device logins), must stop working. Which
// tokens came from a redemption is not recorded, so every login of these accounts ends; their owners sign
// in again with their password or a code e-mailed to the address.
func endClaimedLogins(tx *gorm.DB) error {
	m := tx.Migrator()
	if !m.HasColumn(&User{}, "TokenVersion") {
		if err := m.AddColumn(&User{}, "TokenVersion"); err != nil {
			return err
		}
	}
	if !m.HasColumn(&EmailCode{}, "Attempts") {
		if err := m.AddColumn(&EmailCode{}, "Attempts"); err != nil {
			return err
		}
	}
	claimed := tx.Model(&ClaimRedemption{}).Select("user_id")
	for _, step := range []*gorm.DB{
		tx.Model(&User{}).Where("id IN (?)", claimed).Update("token_version", gorm.Expr("token_version + 1")),
		tx.Where("user_id IN (?)", claimed).Delete(&Session{}),
		tx.Model(&DeviceAuthorization{}).Where("user_id IN (?) AND status = ?", claimed, DeviceApproved).
			Updates(map[string]any{"status": DeviceDenied, "user_id": nil}),
	} {
		if step.Error != nil {
			return step.Error
		}
	}
	return nil
}

// openWorkIndexes replaces the plain status indexes of jobs and video tasks by partial indexes on the
// open rows, which are what the deadline sweep and the queue gauges look for. A plain status index let
// PostgreSQL cache a generic plan for "id = $1 AND status = $2" (the conditional completion of a job)
// that walked every pending job instead of the primary key, when the table had not been analysed yet:
// the completion grew linear in the backlog. A partial index cannot serve a status given as a parameter.
func openWorkIndexes(tx *gorm.DB) error {
	for _, stmt := range []string{
		"DROP INDEX IF EXISTS idx_jobs_status",
		"DROP INDEX IF EXISTS idx_video_tasks_status",
		"CREATE INDEX IF NOT EXISTS idx_jobs_pending ON jobs (deadline) WHERE status = 'pending'",
		"CREATE INDEX IF NOT EXISTS idx_video_tasks_open ON video_tasks (created_at) WHERE status IN ('pending', 'running')",
	} {
		if err := tx.Exec(stmt).Error; err != nil {
			return err
		}
	}
	return nil
}

type schemaMigration struct {
	Version   int `gorm:"primaryKey;autoIncrement:false"`
	Name      string
	AppliedAt time.Time
}

func (schemaMigration) TableName() string { return "schema_migrations" }

// migrationLockKey is the PostgreSQL advisory lock that serialises replicas starting at once.
const migrationLockKey = 7_246_310_001

// Migrate applies pending migrations and then the extra steps (the queue's schema), all under one lock
// so that replicas starting together migrate once.
func Migrate(ctx context.Context, db *DB, extra ...func(ctx context.Context) error) error {
	unlock, err := db.lockMigrations(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := db.WithContext(ctx).AutoMigrate(&schemaMigration{}); err != nil {
		return fmt.Errorf("migrate: schema_migrations: %w", err)
	}
	var applied []int
	if err := db.WithContext(ctx).Model(&schemaMigration{}).Pluck("version", &applied).Error; err != nil {
		return fmt.Errorf("migrate: read versions: %w", err)
	}
	done := map[int]bool{}
	for _, v := range applied {
		done[v] = true
	}
	for _, m := range Migrations {
		if done[m.Version] {
			continue
		}
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := m.Up(tx); err != nil {
				return err
			}
			return tx.Create(&schemaMigration{Version: m.Version, Name: m.Name, AppliedAt: time.Now().UTC()}).Error
		})
		if err != nil {
			return fmt.Errorf("migrate: version %d (%s): %w", m.Version, m.Name, err)
		}
		slog.Info("migration applied", "version", m.Version, "name", m.Name)
	}
	for _, step := range extra {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// lockMigrations takes a session advisory lock on PostgreSQL; SQLite has a single writer connection already.
func (db *DB) lockMigrations(ctx context.Context) (func(), error) {
	if db.Dialect != Postgres {
		return func() {}, nil
	}
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: lock connection: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		conn.Close()
		return nil, fmt.Errorf("migrate: advisory lock: %w", err)
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", migrationLockKey)
		conn.Close()
	}, nil
}
