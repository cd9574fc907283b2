package jobs

import (
	"context"
	"time"

	"gorm.io/gorm"
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

// RecordAttempts stores attempts in one statement and counts them in the metrics. Alike attempts (same
// upstream, outcome, class, latency, job and origin) become one row that counts them, dated by the
// first: under load a write carries thousands of chat calls in a few rows.
func (h *healthStore) RecordAttempts(ctxs []context.Context, as []routing.Attempt) error {
	type key struct {
		upstream, class, job, origin string
		ok                           bool
		latency                      int64
	}
	rows := make([]models.UpstreamAttempt, 0, min(len(as), 64))
	index := map[key]int{}
	for i, a := range as {
		outcome := a.Class
		if a.OK {
			outcome = "ok"
		} else if outcome == "" {
			outcome = "other"
		}
		metrics.UpstreamAttempts.WithLabelValues(a.Upstream, outcome).Add(float64(a.N()))
		k := key{a.Upstream, a.Class, attemptJob(ctxs[i]), a.Origin, a.OK, a.LatencyMS}
		if j, ok := index[k]; ok {
			rows[j].Count += int64(a.N())
			if at := a.At.UTC(); at.Before(rows[j].At) {
				rows[j].At = at
			}
			continue
		}
		index[k] = len(rows)
		rows = append(rows, models.UpstreamAttempt{Upstream: a.Upstream, At: a.At.UTC(), OK: a.OK, LatencyMS: a.LatencyMS,
			Class: a.Class, JobID: k.job, Count: int64(a.N()), Origin: a.Origin})
	}
	ctx, cancel := context.WithTimeout(models.WorkContext(context.Background()), 10*time.Second)
	defer cancel()
	return h.db.WithContext(ctx).CreateInBatches(rows, 500).Error
}

func (h *healthStore) AttemptsSince(ctx context.Context, since time.Time) ([]routing.Attempt, error) {
	return h.attempts(h.db.WithContext(ctx).Where("at >= ?", since.UTC()))
}

// AttemptsSinceExcept reads the attempts of other origins only: a process does not read back its own.
func (h *healthStore) AttemptsSinceExcept(ctx context.Context, since time.Time, origin string) ([]routing.Attempt, error) {
	return h.attempts(h.db.WithContext(ctx).Where("at >= ? AND origin <> ?", since.UTC(), origin))
}

func (h *healthStore) attempts(q *gorm.DB) ([]routing.Attempt, error) {
	var rows []models.UpstreamAttempt
	if err := q.Select("upstream", "at", "ok", "latency_ms", "class", "count", "origin").Order("at").Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]routing.Attempt, len(rows))
	for i, r := range rows {
		out[i] = routing.Attempt{Upstream: r.Upstream, At: r.At, OK: r.OK, LatencyMS: r.LatencyMS, Class: r.Class, Count: int(r.Count), Origin: r.Origin}
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
