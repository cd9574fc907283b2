package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"gorm.io/gorm/clause"
)

// Replicas: every `studio serve` on a database announces itself in the replicas table and keeps its row
// fresh while it runs. A replica that keeps media on its local disk checks, when it starts, that no
// other replica is live on the same database: the others could not serve the files it writes (each
// cdn_url would answer 200 on one replica and 404 on the rest), so it refuses to start with a message
// naming SERVICE_S3_*, unless SERVICE_MEDIA_SHARED says the directory is shared by every replica.

// Replica is one running replica.
type Replica struct {
	// ID is stable per host and data directory, so that a replica restarted after a crash finds its own
	// row and not a stranger's.
	ID        string `gorm:"primaryKey;size:64"`
	Host      string `gorm:"size:255;not null"`
	Media     string `gorm:"size:16;not null"` // local | s3
	StartedAt time.Time
	SeenAt    time.Time `gorm:"index"`
}

// Replica heartbeats: a replica whose row is older than ReplicaLive is gone.
const (
	ReplicaBeat = 5 * time.Second
	ReplicaLive = 3 * ReplicaBeat
)

// ReplicaID names the replica of this host and data directory.
func ReplicaID(host, dataDir string) string {
	sum := sha256.Sum256([]byte(host + "\x00" + dataDir))
	return hex.EncodeToString(sum[:16])
}

// JoinReplicas announces this replica (media "local" or "s3") and keeps its row fresh until leave,
// which removes it. When this replica or another live one keeps media on a local disk, joining other
// live replicas is an error naming the settings to change, unless shared says the media directory is
// shared by all. On SQLite, where one process
// serves, it does nothing.
func (a *App) JoinReplicas(ctx context.Context, id, mediaKind string, shared bool) (leave func(), err error) {
	if a.DB.Dialect != Postgres {
		return func() {}, nil
	}
	host, _ := os.Hostname()
	now := time.Now().UTC()
	var others []Replica
	if err := a.DB.WithContext(ctx).Where("id <> ? AND seen_at > ?", id, now.Add(-ReplicaLive)).Find(&others).Error; err != nil {
		return nil, Internal("replicas: look up", err)
	}
	local := mediaKind == "local"
	for _, o := range others {
		local = local || o.Media == "local"
	}
	if local && !shared && len(others) > 0 {
		return nil, fmt.Errorf("another replica (%s) serves this database, and media are kept on a local disk: each replica "+
			"could not serve the files another stores. Use S3-compatible storage (SERVICE_S3_ENDPOINT, SERVICE_S3_BUCKET, "+
			"SERVICE_S3_ACCESS_KEY, SERVICE_S3_SECRET_KEY, SERVICE_S3_PUBLIC_URL) on every replica, or, if SERVICE_DATA_DIR "+
			"is one directory shared by all replicas (a network file system), set SERVICE_MEDIA_SHARED=true", others[0].Host)
	}
	row := Replica{ID: id, Host: host, Media: mediaKind, StartedAt: now, SeenAt: now}
	err = a.DB.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}},
		DoUpdates: clause.AssignmentColumns([]string{"host", "media", "started_at", "seen_at"})}).Create(&row).Error
	if err != nil {
		return nil, Internal("replicas: announce", err)
	}
	beat, stop := context.WithCancel(WorkContext(context.WithoutCancel(ctx)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ReplicaBeat)
		defer t.Stop()
		for {
			select {
			case <-beat.Done():
				return
			case <-t.C:
			}
			if err := a.DB.WithContext(beat).Model(&Replica{}).Where("id = ?", id).Update("seen_at", time.Now().UTC()).Error; err != nil && beat.Err() == nil {
				slog.Warn("replicas: heartbeat failed", "err", err)
			}
		}
	}()
	return func() {
		stop()
		<-done
		if err := a.DB.WithContext(context.Background()).Delete(&Replica{}, "id = ?", id).Error; err != nil {
			slog.Warn("replicas: leave", "err", err)
		}
	}, nil
}
