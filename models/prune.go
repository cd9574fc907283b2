package models

import (
	"context"
	"time"
)

// AttemptRetention keeps upstream attempts long enough for the widest tenant-stats window (168 h).
const AttemptRetention = 8 * 24 * time.Hour

// PruneExpired deletes rows whose use has passed: old upstream attempts, rate-limit windows, idempotency
// records, used or expired codes and sessions. It returns how many rows went.
func (a *App) PruneExpired(ctx context.Context) (int64, error) {
	now := a.Now()
	db := a.DB.WithContext(ctx)
	steps := []struct {
		model any
		where string
		arg   time.Time
	}{
		{&UpstreamAttempt{}, "at < ?", now.Add(-AttemptRetention)},
		{&RateCounter{}, "window_start < ?", now.Add(-2 * time.Hour)},
		{&IdempotencyRecord{}, "created_at < ?", now.Add(-IdempotencyTTL)},
		{&EmailCode{}, "expires_at < ?", now.Add(-time.Hour)},
		{&DeviceAuthorization{}, "expires_at < ?", now.Add(-time.Hour)},
		{&Session{}, "expires_at < ?", now},
	}
	var total int64
	for _, s := range steps {
		res := db.Where(s.where, s.arg).Delete(s.model)
		if res.Error != nil {
			return total, Internal("prune", res.Error)
		}
		total += res.RowsAffected
	}
	return total, nil
}
