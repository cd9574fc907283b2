package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// UpstreamTask is the submission of one job or video task to an upstream task protocol (jobs/tasks.go):
// written as "submitting" before the request leaves, then "submitted" with the provider's task id
// before the first poll. A replica that crashes or stops leaves the row behind: the next run of the
// work resumes polling that task, finds it by its reference, or fails the work with its refund, and
// never submits a paid task twice.
type UpstreamTask struct {
	// OwnerID is the job or video task the submission belongs to.
	OwnerID  string `gorm:"primaryKey;size:36"`
	Media    string `gorm:"size:16;not null"`
	Upstream string `gorm:"size:200;not null;default:''"` // private: never shown to tenants
	// Ref is studio's name of the submission (sent to providers that let the client name a task).
	Ref string `gorm:"size:80;not null;default:''"`
	// TaskID is the provider's task id once it answered.
	TaskID string `gorm:"size:500;not null;default:''"`
	// State is '' (nothing at an upstream), submitting or submitted.
	State string `gorm:"size:16;not null;default:''"`
	// Attempt counts the submissions made, so that each one gets its own reference.
	Attempt   int `gorm:"not null;default:0"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// States of an upstream task row.
const (
	UpstreamTaskNone       = ""
	UpstreamTaskSubmitting = "submitting"
	UpstreamTaskSubmitted  = "submitted"
)

// UpstreamTaskOf returns the submission row of a job or video task, or nil when there is none.
func (js *JobService) UpstreamTaskOf(ctx context.Context, ownerID string) (*UpstreamTask, error) {
	a := js.a
	var t UpstreamTask
	err := a.DB.WithContext(ctx).First(&t, "owner_id = ?", ownerID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, Internal("upstream task: read", err)
	}
	return &t, nil
}

// BeginUpstreamSubmit records, before the request leaves, that the work is being submitted to
// upstream, and returns the row with the reference of this submission (owner id and attempt number).
// It refuses while a submission is recorded as under way or done: that one must be resumed.
func (js *JobService) BeginUpstreamSubmit(ctx context.Context, ownerID, media, upstream string) (*UpstreamTask, error) {
	a := js.a
	var out *UpstreamTask
	err := a.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var t UpstreamTask
		err := tx.First(&t, "owner_id = ?", ownerID).Error
		now := a.Now()
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			t = UpstreamTask{OwnerID: ownerID, Media: media, CreatedAt: now}
		case err != nil:
			return err
		case t.State != UpstreamTaskNone:
			return Conflict(fmt.Sprintf("a submission of %s is already %s", ownerID, t.State))
		}
		t.Attempt++
		t.Upstream, t.State, t.TaskID, t.UpdatedAt = upstream, UpstreamTaskSubmitting, "", now
		t.Ref = fmt.Sprintf("%s-%d", ownerID, t.Attempt)
		if err := tx.Save(&t).Error; err != nil {
			return err
		}
		out = &t
		return nil
	})
	if err != nil {
		if KindOf(err) == KindConflict {
			return nil, err
		}
		return nil, Internal("upstream task: begin", err)
	}
	return out, nil
}

// UpstreamSubmitRefused records that the submission in progress was refused by the upstream (nothing
// was started there): the work may be submitted again.
func (js *JobService) UpstreamSubmitRefused(ctx context.Context, ownerID string) error {
	a := js.a
	err := a.DB.WithContext(ctx).Model(&UpstreamTask{}).Where("owner_id = ? AND state = ?", ownerID, UpstreamTaskSubmitting).
		Updates(map[string]any{"state": UpstreamTaskNone, "updated_at": a.Now()}).Error
	if err != nil {
		return Internal("upstream task: refused", err)
	}
	return nil
}

// UpstreamSubmitted records the provider's task id of the submission in progress.
func (js *JobService) UpstreamSubmitted(ctx context.Context, ownerID, upstream, taskID string) error {
	a := js.a
	err := a.DB.WithContext(ctx).Model(&UpstreamTask{}).Where("owner_id = ?", ownerID).
		Updates(map[string]any{"state": UpstreamTaskSubmitted, "upstream": upstream, "task_id": taskID, "updated_at": a.Now()}).Error
	if err != nil {
		return Internal("upstream task: submitted", err)
	}
	return nil
}
