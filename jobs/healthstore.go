package jobs

import (
	"context"
	"time"

	"gorm.io/gorm/clause"

	"studio/jobs/routing"
	"studio/models"
	"studio/models/metrics"
)

// healthStore keeps routing health in the database so that restarts keep scores and replicas share them.
type healthStore struct{ db *models.DB }

// NewHealthStore returns the database-backed routing.HealthStore.
func NewHealthStore(db *models.DB) routing.HealthStore { return &healthStore{db: db} }

func (h *healthStore) RecordAttempt(ctx context.Context, a routing.Attempt) error {
	return h.RecordAttempts([]context.Context{ctx}, []routing.Attempt{a})
}

// RecordAttempts stores attempts in one statement and counts them in the metrics.
func (h *healthStore) RecordAttempts(ctxs []context.Context, as []routing.Attempt) error {
	rows := make([]models.UpstreamAttempt, len(as))
	for i, a := range as {
		outcome := a.Class
		if a.OK {
			outcome = "ok"
		} else if outcome == "" {
			outcome = "other"
		}
		metrics.UpstreamAttempts.WithLabelValues(a.Upstream, outcome).Inc()
		rows[i] = models.UpstreamAttempt{Upstream: a.Upstream, At: a.At.UTC(), OK: a.OK, LatencyMS: a.LatencyMS, Class: a.Class, JobID: attemptJob(ctxs[i])}
	}
	ctx, cancel := context.WithTimeout(models.WorkContext(context.Background()), 10*time.Second)
	defer cancel()
	return h.db.WithContext(ctx).CreateInBatches(rows, 500).Error
}

func (h *healthStore) AttemptsSince(ctx context.Context, since time.Time) ([]routing.Attempt, error) {
	var rows []models.UpstreamAttempt
	if err := h.db.WithContext(ctx).Where("at >= ?", since.UTC()).Order("at").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]routing.Attempt, len(rows))
	for i, r := range rows {
		out[i] = routing.Attempt{Upstream: r.Upstream, At: r.At, OK: r.OK, LatencyMS: r.LatencyMS, Class: r.Class}
	}
	return out, nil
}

func (h *healthStore) SetState(ctx context.Context, s routing.State) error {
	return h.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&models.UpstreamState{
		Upstream: s.Upstream, Disabled: s.Disabled, Removed: s.Removed, Reason: s.Reason, Since: s.Since.UTC()}).Error
}

func (h *healthStore) States(ctx context.Context) ([]routing.State, error) {
	var rows []models.UpstreamState
	if err := h.db.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]routing.State, len(rows))
	for i, r := range rows {
		out[i] = routing.State{Upstream: r.Upstream, Disabled: r.Disabled, Removed: r.Removed, Reason: r.Reason, Since: r.Since}
	}
	return out, nil
}

type jobKey struct{}

// withJob tags the context so attempts recorded under it name their job (tenant statistics count them).
func withJob(ctx context.Context, jobID string) context.Context {
	return context.WithValue(ctx, jobKey{}, jobID)
}

func attemptJob(ctx context.Context) string {
	id, _ := ctx.Value(jobKey{}).(string)
	return id
}
