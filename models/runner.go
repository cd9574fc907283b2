package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Runners: a generation that waits on its upstream holds no queue worker and no database connection.
// The queue hands the job to a process (jobs/inflight.go), which claims it by writing its own name in
// the job's runner column and keeps a row of its own fresh in job_runners while it lives. The job stays
// pending and its result is committed when the upstream answers. A job whose runner stopped beating (the
// process died) is queued again by the rescue pass of whichever process leads the queue; a process that
// stops hands its jobs back itself. A job is claimed only while nobody holds it, so a live process never
// sees its call made a second time; completing is conditional on the job being open, so two processes
// that both ran it (one was only thought dead) end it once, charged once.

// JobRunner is a process that holds jobs waiting on their upstreams.
type JobRunner struct {
	ID     string    `gorm:"primaryKey;size:64"`
	SeenAt time.Time `gorm:"not null"`
}

// Runner heartbeats and waits.
const (
	// RunnerBeat is how often a process refreshes its job_runners row.
	RunnerBeat = 5 * time.Second
	// RunnerLive is how old that row may be while the process counts as alive: three beats.
	RunnerLive = 3 * RunnerBeat
	// SlotWaitLimit bounds how long a job waits for a free slot of its upstreams' max_concurrency (its
	// deadline meanwhile; the job deadline counts from when it gets one).
	SlotWaitLimit = 24 * time.Hour
	// rescueBatch bounds the jobs one rescue pass queues again.
	rescueBatch = 1000
)

// SlotWaitNote is the progress note of a job waiting for a free slot (it names no upstream).
const SlotWaitNote = "waiting for a free slot at the provider (its concurrency limit is reached)"

// RunnerService keeps the processes that hold jobs and the jobs they hold.
type RunnerService struct{ a *App }

// Runners returns the service of the processes that hold jobs outside the queue.
func (a *App) Runners() *RunnerService { return a.svc.runners }

// Beat announces the process id as alive (its first beat creates its row).
func (rs *RunnerService) Beat(ctx context.Context, id string) error {
	a := rs.a
	row := JobRunner{ID: id, SeenAt: a.Now().UTC()}
	err := a.DB.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}},
		DoUpdates: clause.AssignmentColumns([]string{"seen_at"})}).Create(&row).Error
	if err != nil {
		return Internal("runners: beat", err)
	}
	return nil
}

// Leave removes the process's row: its jobs, if any are left, are queued again by the next rescue pass.
func (rs *RunnerService) Leave(ctx context.Context, id string) error {
	if err := rs.a.DB.WithContext(ctx).Delete(&JobRunner{}, "id = ?", id).Error; err != nil {
		return Internal("runners: leave", err)
	}
	return nil
}

// Live counts the processes alive now (at least 1: the caller is one).
func (rs *RunnerService) Live(ctx context.Context) (int, error) {
	a := rs.a
	var n int64
	if err := a.DB.WithContext(ctx).Model(&JobRunner{}).Where("seen_at > ?", a.Now().UTC().Add(-RunnerLive)).Count(&n).Error; err != nil {
		return 1, Internal("runners: count", err)
	}
	return max(int(n), 1), nil
}

// Claim lets the process runner hold a pending job that nobody holds and that needs an upstream call
// (no provider's task of it to poll), in one statement that returns the job and whether a submission of
// it was begun (an upstream task in state submitting, to be looked up before anything is sent again).
// It returns nil when the job ended, another process holds it, or its task is to be polled.
func (rs *RunnerService) Claim(ctx context.Context, jobID, runner string) (*Job, bool, error) {
	var rows []struct {
		Job
		TaskState *string
	}
	err := rs.a.DB.WithContext(ctx).Raw(`UPDATE jobs SET runner = ? WHERE id = ? AND status = ? AND runner IS NULL
		AND NOT EXISTS (SELECT 1 FROM upstream_tasks WHERE owner_id = ? AND state = ?)
		RETURNING *, (SELECT state FROM upstream_tasks WHERE owner_id = jobs.id) AS task_state`,
		runner, jobID, JobPending, jobID, UpstreamTaskSubmitted).Scan(&rows).Error
	if err != nil {
		return nil, false, Internal("runners: claim", err)
	}
	if len(rows) != 1 {
		return nil, false, nil
	}
	begun := rows[0].TaskState != nil && *rows[0].TaskState != UpstreamTaskNone
	j := rows[0].Job // a copy: GORM's slice has room for 20 rows, which a held pointer would keep alive
	return &j, begun, nil
}

// Release hands jobs the process runner holds back to the queue, to run again after delay (a task to
// poll, a retry, a stop): in one transaction the jobs it still holds are let go and queued.
func (rs *RunnerService) Release(ctx context.Context, runner string, delay time.Duration, jobIDs ...string) error {
	if len(jobIDs) == 0 {
		return nil
	}
	a := rs.a
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		return a.Runners().releaseTx(tx, runner, delay, jobIDs)
	})
	if err != nil {
		return Internal("runners: release", err)
	}
	return nil
}

// releaseTx lets go of the jobs of jobIDs that runner holds and queues each again after delay.
func (rs *RunnerService) releaseTx(tx *gorm.DB, runner string, delay time.Duration, jobIDs []string) error {
	var held []string
	for start := 0; start < len(jobIDs); start += 500 {
		part := jobIDs[start:min(start+500, len(jobIDs))]
		q := tx.Model(&Job{}).Where("id IN ? AND runner = ? AND status = ?", part, runner, JobPending)
		if rs.a.DB.Dialect == Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		var ids []string
		if err := q.Pluck("id", &ids).Error; err != nil {
			return err
		}
		if len(ids) == 0 {
			continue
		}
		if err := tx.Model(&Job{}).Where("id IN ?", ids).Update("runner", nil).Error; err != nil {
			return err
		}
		held = append(held, ids...)
	}
	if len(held) == 0 {
		return nil
	}
	work := make([]Work, len(held))
	for i, id := range held {
		work[i] = Work{Kind: WorkImage, ID: id, Delay: delay}
	}
	return rs.a.enqueue(tx, work...)
}

// RescueOrphans queues again the pending jobs held by processes that stopped beating (they died), and
// forgets processes gone for an hour. It returns how many jobs it queued.
func (rs *RunnerService) RescueOrphans(ctx context.Context) (int, error) {
	a := rs.a
	now := a.Now().UTC()
	var orphans []struct {
		ID     string
		Runner string
	}
	err := a.DB.WithContext(ctx).Model(&Job{}).Select("id, runner").
		Where("status = ? AND runner IS NOT NULL AND runner NOT IN (?)", JobPending,
			a.DB.Gorm.Model(&JobRunner{}).Select("id").Where("seen_at > ?", now.Add(-RunnerLive))).
		Limit(rescueBatch).Scan(&orphans).Error
	if err != nil {
		return 0, Internal("runners: orphans", err)
	}
	byRunner := map[string][]string{}
	for _, o := range orphans {
		byRunner[o.Runner] = append(byRunner[o.Runner], o.ID)
	}
	for runner, ids := range byRunner {
		if err := rs.Release(ctx, runner, 0, ids...); err != nil {
			return 0, err
		}
	}
	if err := a.DB.WithContext(ctx).Where("seen_at < ?", now.Add(-time.Hour)).Delete(&JobRunner{}).Error; err != nil {
		return 0, Internal("runners: forget", err)
	}
	return len(orphans), nil
}

// WaitForSlot notes that a held job waits for a free slot of its upstreams' max_concurrency: its
// progress says so and its deadline moves to SlotWaitLimit from now, so that waiting does not use the
// time of the generation. It returns the new deadline.
func (rs *RunnerService) WaitForSlot(ctx context.Context, jobID string) (time.Time, error) {
	return rs.setDeadline(ctx, jobID, SlotWaitLimit, SlotWaitNote)
}

// SlotTaken notes that a job that waited got a slot: its deadline counts from now. It returns the new
// deadline.
func (rs *RunnerService) SlotTaken(ctx context.Context, jobID string) (time.Time, error) {
	return rs.setDeadline(ctx, jobID, rs.a.Config.JobDeadline, "generating")
}

func (rs *RunnerService) setDeadline(ctx context.Context, jobID string, after time.Duration, note string) (time.Time, error) {
	a := rs.a
	now := a.Now()
	deadline := now.Add(after)
	res := a.DB.WithContext(ctx).Model(&Job{}).Where("id = ? AND status = ?", jobID, JobPending).
		Updates(map[string]any{"deadline": deadline, "progress": note, "updated_at": now})
	if res.Error != nil {
		return deadline, Internal("runners: deadline", res.Error)
	}
	a.notify(ctx, TopicJob, jobID)
	return deadline, nil
}
