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
func (js *JobService) CompleteJob(ctx context.Context, j *Job, cdnURL string, costUSD float64, elapsed time.Duration) error {
	a := js.a
	steps := finalSteps(j.Steps, true)
	// The job's end is read from the clock once its connection is taken (a busy pool may keep a
	// completion waiting): finished_at is when the job is seen done, not when it began to wait.
	finish := func(tx *gorm.DB) error {
		now := a.Now()
		up := map[string]any{"cdn_url": cdnURL, "cost_usd": costUSD, "elapsed_ms": elapsed.Milliseconds(), "status": JobDone,
			"progress": "", "updated_at": now, "finished_at": now, "steps": steps}
		res := tx.Model(&Job{}).Where("id = ? AND "+jobIsOpen, j.ID).Updates(up)
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
	}
	var err error
	if j.CallbackURL == "" {
		// One conditional statement: no transaction needed.
		err = a.DB.onConn(ctx, finish)
	} else {
		err = a.Tx(ctx, finish)
	}
	if err == errJobEnded {
		return nil
	}
	if err != nil {
		return asCoreError("job: complete", err)
	}
	metrics.JobsEnded.WithLabelValues("image", string(JobDone)).Inc()
	a.notify(ctx, TopicJob, j.ID)
	return nil
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
