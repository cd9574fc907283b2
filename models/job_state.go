package models

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"studio/models/metrics"

	"gorm.io/gorm"
)

// SetJobProgress records the progress note of a pending job (for example a switch to a backup channel).
func (js *JobService) SetJobProgress(ctx context.Context, jobID, note string) error {
	a := js.a
	res := a.DB.WithContext(ctx).Model(&Job{}).Where("id = ? AND "+jobIsOpen, jobID).
		Updates(map[string]any{"progress": note, "updated_at": a.Now()})
	if res.Error != nil {
		return Internal("job: progress", res.Error)
	}
	a.notify(ctx, TopicJob, jobID)
	return nil
}

// SetJobStep marks step current of a multi-step job as running (earlier ones done).
func (js *JobService) SetJobStep(ctx context.Context, jobID string, current int) error {
	a := js.a
	j, err := a.Jobs().Job(ctx, jobID)
	if err != nil {
		return err
	}
	names := specStepNames
	if j.Kind == JobKindImageToTemplate {
		names = imageToTemplateStepNames
	}
	steps, _ := json.Marshal(stepsAt(names, current))
	res := a.DB.WithContext(ctx).Model(&Job{}).Where("id = ? AND "+jobIsOpen, jobID).
		Updates(map[string]any{"steps": steps, "updated_at": a.Now()})
	if res.Error != nil {
		return Internal("job: step", res.Error)
	}
	a.notify(ctx, TopicJob, jobID)
	return nil
}

// finalSteps closes the steps of a job that ended: all done, or the running one failed; none stays running.
func finalSteps(raw []byte, ok bool) []byte {
	if len(raw) == 0 {
		return raw
	}
	var steps []Step
	if json.Unmarshal(raw, &steps) != nil {
		return raw
	}
	for i := range steps {
		switch {
		case ok:
			steps[i].Status = "done"
		case steps[i].Status == StepRunning:
			steps[i].Status = StepFailed
		}
	}
	out, _ := json.Marshal(steps)
	return out
}

// CompleteJob marks a pending job done with its result and queues its callback, in one transaction.
// j is the job as its worker loaded it (its steps and callback URL); the update is conditional on the
// job still being pending, so a job that already ended (another worker finished it) is left alone.
// Completions that come together are committed together (one statement and one transaction for the
// batch: commitCompletions), so that a thousand generations answering in the same second do not queue
// for the few connections of background work one statement each.
func (js *JobService) CompleteJob(ctx context.Context, j *Job, cdnURL string, costUSD float64, elapsed time.Duration) error {
	a := js.a
	u := &completeUnit{j: j, cdnURL: cdnURL, costUSD: costUSD, elapsed: elapsed}
	a.completions.do(ctx, "", u)
	if u.err != nil {
		return asCoreError("job: complete", u.err)
	}
	if u.done {
		metrics.JobsEnded.WithLabelValues("image", string(JobDone)).Inc()
		a.notify(ctx, TopicJob, j.ID)
	}
	return nil
}

// completeUnit is one job's completion waiting to be committed; done says whether the batch ended the
// job (false when it had ended already).
type completeUnit struct {
	j       *Job
	cdnURL  string
	costUSD float64
	elapsed time.Duration
	done    bool
	err     error
}

// maxCompleteBatch bounds the completions of one statement (5 parameters each).
const maxCompleteBatch = 200

func newCompleteBatcher(a *App) *groupCommit[*completeUnit] {
	return &groupCommit[*completeUnit]{max: maxCompleteBatch, size: func(*completeUnit) int { return 1 }, commit: a.commitCompletions}
}

// commitCompletions ends the open jobs of a batch in one transaction: one conditional UPDATE for them
// all, and the callbacks of those it ended. The time of their end is read once the transaction holds its
// connection (a busy pool may keep a batch waiting): finished_at is when the jobs are seen done.
func (a *App) commitCompletions(ctx context.Context, batch []*completeUnit) {
	var ended map[string]bool
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		if ended, err = completeJobsTx(tx, a.DB.Dialect, batch, a.Now()); err != nil {
			return err
		}
		var work []Work
		for _, u := range batch {
			if ended[u.j.ID] && u.j.CallbackURL != "" {
				work = append(work, Work{Kind: WorkCallback, ID: u.j.ID})
			}
		}
		return a.enqueue(tx, work...)
	})
	for _, u := range batch {
		u.err, u.done = err, err == nil && ended[u.j.ID]
	}
}

// completeJobsTx marks the open jobs of batch done with their results in one statement and returns the
// ids of those it ended.
func completeJobsTx(tx *gorm.DB, dialect Dialect, batch []*completeUnit, now time.Time) (map[string]bool, error) {
	stepsType := "TEXT"
	if dialect == Postgres {
		stepsType = "JSONB" // steps is jsonb on PostgreSQL, text on SQLite
	}
	row := "SELECT CAST(? AS VARCHAR(36)) AS id, CAST(? AS TEXT) AS cdn_url, CAST(? AS DOUBLE PRECISION) AS cost_usd, " +
		"CAST(? AS BIGINT) AS elapsed_ms, CAST(? AS " + stepsType + ") AS steps"
	var rows strings.Builder
	args := []any{JobDone, now, now}
	for i, u := range batch {
		if i > 0 {
			rows.WriteString(" UNION ALL ")
		}
		rows.WriteString(row)
		var steps any // NULL for a job without steps
		if s := finalSteps(u.j.Steps, true); len(s) > 0 {
			steps = string(s)
		}
		args = append(args, u.j.ID, u.cdnURL, u.costUSD, u.elapsed.Milliseconds(), steps)
	}
	var ids []string
	err := tx.Raw(`UPDATE jobs SET status = ?, progress = '', updated_at = ?, finished_at = ?, cdn_url = v.cdn_url,
		cost_usd = v.cost_usd, elapsed_ms = v.elapsed_ms, steps = v.steps
		FROM (`+rows.String()+`) AS v WHERE jobs.id = v.id AND jobs.`+jobIsOpen+` RETURNING jobs.id`, args...).Scan(&ids).Error
	if err != nil {
		return nil, err
	}
	ended := make(map[string]bool, len(ids))
	for _, id := range ids {
		ended[id] = true
	}
	return ended, nil
}

// jobIsOpen is the condition of a job that has not ended, for the conditional updates of one job by id.
// It is written as "not ended" on purpose: status = 'pending' matches the partial index idx_jobs_pending,
// and with no statistics yet (a new table, or autovacuum off) PostgreSQL may plan "id = x AND status =
// 'pending'" as a walk of every pending job instead of one probe of the primary key.
var jobIsOpen = "status NOT IN ('" + string(JobDone) + "', '" + string(JobFailed) + "')"

// completeJob runs extra work (such as creating a template) and marks the job done, all in one transaction.
func (a *App) completeJob(ctx context.Context, jobID string, extra func(tx *gorm.DB, j *Job) (map[string]any, error)) error {
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var j Job
		if err := tx.First(&j, "id = ?", jobID).Error; err != nil {
			return err
		}
		if j.Status != JobPending {
			return errJobEnded
		}
		now := a.Now()
		up, err := extra(tx, &j)
		if err != nil {
			return err
		}
		up["status"], up["progress"], up["updated_at"], up["finished_at"] = JobDone, "", now, now
		up["steps"] = finalSteps(j.Steps, true)
		if _, ok := up["elapsed_ms"]; !ok {
			up["elapsed_ms"] = now.Sub(j.CreatedAt).Milliseconds()
		}
		res := tx.Model(&Job{}).Where("id = ? AND "+jobIsOpen, jobID).Updates(up)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errJobEnded
		}
		if j.CallbackURL != "" {
			return a.enqueue(tx, Work{Kind: WorkCallback, ID: j.ID})
		}
		return nil
	})
	if err == errJobEnded {
		return nil
	}
	if err != nil {
		return asCoreError("job: complete", err)
	}
	metrics.JobsEnded.WithLabelValues("image", string(JobDone)).Inc()
	a.notify(ctx, TopicJob, jobID)
	return nil
}

var errJobEnded = &Error{Kind: KindConflict, Message: "job already ended"}

// FailJob marks a pending job failed with a reason, refunds its credits in full at once, and queues its
// callback, in one transaction; a job that already ended is left alone (never refunded twice).
func (js *JobService) FailJob(ctx context.Context, jobID, reason string) error {
	a := js.a
	err := a.Tx(ctx, func(tx *gorm.DB) error { return a.failJobTx(tx, jobID, reason) })
	if err == errJobEnded {
		return nil
	}
	if err != nil {
		return asCoreError("job: fail", err)
	}
	metrics.JobsEnded.WithLabelValues("image", string(JobFailed)).Inc()
	a.notify(ctx, TopicJob, jobID)
	return nil
}

func (a *App) failJobTx(tx *gorm.DB, jobID, reason string) error {
	var j Job
	if err := tx.First(&j, "id = ?", jobID).Error; err != nil {
		return err
	}
	if j.Status != JobPending {
		return errJobEnded
	}
	now := a.Now()
	res := tx.Model(&Job{}).Where("id = ? AND "+jobIsOpen, jobID).Updates(map[string]any{
		"status": JobFailed, "error": reason, "progress": "", "updated_at": now, "finished_at": now,
		"elapsed_ms": now.Sub(j.CreatedAt).Milliseconds(), "steps": finalSteps(j.Steps, false)})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errJobEnded
	}
	if _, err := a.Credits().RefundJobTx(tx, &j); err != nil {
		return err
	}
	if j.CallbackURL != "" {
		return a.enqueue(tx, Work{Kind: WorkCallback, ID: j.ID})
	}
	return nil
}

// ExpireOverdueJobs fails and refunds image jobs and video tasks whose deadline passed more than grace
// ago, whatever happened to their worker.
func (js *JobService) ExpireOverdueJobs(ctx context.Context, grace time.Duration) (int, error) {
	a := js.a
	var ids []string
	if err := a.DB.WithContext(ctx).Model(&Job{}).Where("status = ? AND deadline < ?", JobPending, a.Now().Add(-grace)).
		Limit(500).Pluck("id", &ids).Error; err != nil {
		return 0, Internal("job: overdue", err)
	}
	reason := fmt.Sprintf("generation timed out after %s; credits refunded", a.Config.JobDeadline)
	for _, id := range ids {
		if err := a.Jobs().FailJob(ctx, id, reason); err != nil {
			return 0, err
		}
	}
	var videos []string
	if err := a.DB.WithContext(ctx).Model(&VideoTask{}).Where("status IN ? AND created_at < ?", []VideoStatus{VideoPending, VideoRunning},
		a.Now().Add(-a.Config.JobDeadline-grace)).Limit(500).Pluck("id", &videos).Error; err != nil {
		return 0, Internal("video: overdue", err)
	}
	for _, id := range videos {
		if _, err := a.Videos().FailVideoTask(ctx, id, reason); err != nil {
			return 0, err
		}
	}
	return len(ids) + len(videos), nil
}

// SetCallbackState records the delivery state of a job's callback.
func (js *JobService) SetCallbackState(ctx context.Context, jobID string, state CallbackState, lastErr string) error {
	a := js.a
	if len(lastErr) > 480 {
		lastErr = lastErr[:480]
	}
	return a.DB.WithContext(ctx).Model(&Job{}).Where("id = ?", jobID).
		Updates(map[string]any{"callback": state, "callback_err": lastErr}).Error
}

// CallbackKey returns the HMAC key that signs a job's callbacks: the tenant's callback secret
// (`whsec_` + base64, as in Standard Webhooks), or for a personal login its UserCallbackSecret.
func (js *JobService) CallbackKey(ctx context.Context, j *Job) ([]byte, error) {
	a := js.a
	if j.TenantID == nil {
		return CallbackSecretKey(a.Jobs().UserCallbackSecret(derefString(j.UserID))), nil
	}
	t, err := a.tenantByID(ctx, *j.TenantID)
	if err != nil {
		return nil, err
	}
	return CallbackSecretKey(t.CallbackSecret), nil
}

// UserCallbackSecret returns the callback signing secret of a personal account in the form of the
// tenants' secrets (`whsec_` + base64): derived from the service secret, so it is the same on every
// replica and needs no storage. The person reads it in GET /api/whoami and on the console.
func (js *JobService) UserCallbackSecret(userID string) string {
	a := js.a
	return "whsec_" + base64.StdEncoding.EncodeToString(Sign(a.secret, "callback", []byte(userID)))
}

// CallbackSecretKey decodes a `whsec_` secret into its HMAC key.
func CallbackSecretKey(secret string) []byte {
	raw := strings.TrimPrefix(secret, "whsec_")
	if b, err := base64.StdEncoding.DecodeString(raw); err == nil {
		return b
	}
	return []byte(raw)
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
