package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
)

// The one asynchronous-task path of every upstream task protocol (jobs/upstream/<name>), for images
// and videos alike:
//
//  1. Before a request leaves, the submission is recorded (models.UpstreamTask "submitting", with the
//     upstream and studio's reference of the submission).
//  2. The provider's answer is recorded at once: its task id ("submitted"), before the first poll; a
//     refusal (an HTTP error, nothing started) clears the record so another attempt may be made.
//  3. The work then polls the task once per run of its queued work and snoozes between runs (no worker
//     waits), and copies the outputs into the media store as soon as they are ready.
//
// A replica that crashes or stops anywhere resumes from the record: a submitted task is polled again,
// never submitted again; a submission whose answer was lost (crash, time-out) is looked up by its
// reference where the provider lets the client name a task (upstream.Finder), and otherwise the work
// fails with its refund rather than pay for a second task.

// errLostSubmission is the failure of work whose submission cannot be followed: the answer was lost and
// the provider cannot find the task by studio's reference.
var errLostSubmission = errors.New("the submission's answer was lost and the provider cannot find the task by its reference")

// lostSubmissionMessage is the tenant's message for errLostSubmission.
const lostSubmissionMessage = "generation was interrupted while it was being submitted and cannot be followed; credits refunded, you may resubmit"

// submitted is a task that an upstream accepted.
type submitted struct {
	u    *upstream.Upstream
	task *upstream.Task
}

// submitTask submits req to the upstream u for the work ownerID (a job or video task id), recording the
// submission before the request leaves and the provider's task id when it answers. It is the call of one
// routing attempt: a refusal of the content or a lost answer end the routing run (routing.Abort); other
// classified errors let routing retry or move on.
func (s *Service) submitTask(ctx context.Context, ownerID string, u *upstream.Upstream, req upstream.TaskRequest) (*submitted, error) {
	app := s.App
	tasks := u.Tasks()
	row, err := app.Jobs().BeginUpstreamSubmit(context.WithoutCancel(ctx), ownerID, string(req.Media), u.Name)
	if err != nil {
		return nil, routing.Abort(err)
	}
	req.Ref = row.Ref
	t, err := tasks.Submit(ctx, req)
	if err != nil && upstream.UnknownOutcome(err) {
		// The provider may have started a task: find it by its reference, or give up without a second one.
		if f, ok := tasks.(upstream.Finder); ok {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), u.SoftTimeout)
			found, ferr := f.Find(fctx, req.Media, row.Ref)
			cancel()
			switch {
			case ferr == nil && found != nil:
				t, err = found, nil
			case ferr == nil:
				// Nothing was started: the attempt failed like any transient error.
				if rerr := app.Jobs().UpstreamSubmitRefused(context.WithoutCancel(ctx), ownerID); rerr != nil {
					return nil, routing.Abort(rerr)
				}
				return nil, err
			default:
				slog.Warn("tasks: looking up a submission whose answer was lost failed", "owner", ownerID, "upstream", u.Name, "err", ferr)
				return nil, routing.Abort(fmt.Errorf("%w: %w", errLostSubmission, err))
			}
		} else {
			slog.Warn("tasks: the answer of a submission was lost; not submitting again", "owner", ownerID, "upstream", u.Name, "err", err)
			return nil, routing.Abort(fmt.Errorf("%w: %w", errLostSubmission, err))
		}
	}
	if err != nil {
		if rerr := app.Jobs().UpstreamSubmitRefused(context.WithoutCancel(ctx), ownerID); rerr != nil {
			return nil, routing.Abort(rerr)
		}
		if upstream.ClassOf(err) == upstream.ClassRefused {
			return nil, routing.Abort(err)
		}
		waitRetryAfter(ctx, err)
		return nil, err
	}
	if err := app.Jobs().UpstreamSubmitted(context.WithoutCancel(ctx), ownerID, u.Name, t.ID); err != nil {
		return nil, routing.Abort(err)
	}
	return &submitted{u: u, task: t}, nil
}

// maxRetryAfter bounds how long an attempt honours an upstream's Retry-After before routing retries.
const maxRetryAfter = 20 * time.Second

// waitRetryAfter waits the delay a transient error asked for (at most maxRetryAfter, within ctx).
func waitRetryAfter(ctx context.Context, err error) {
	var ue *upstream.Error
	if errors.As(err, &ue) && ue.Class == upstream.ClassTransient && ue.RetryAfter > 0 {
		_ = upstream.Sleep(ctx, min(ue.RetryAfter, maxRetryAfter))
	}
}

// resumeSubmission follows a submission recorded by an earlier run. It returns the upstream and the
// task id to poll; ("", nil) when nothing was started and the work may be submitted; errLostSubmission
// when the answer was lost and cannot be recovered.
func (s *Service) resumeSubmission(ctx context.Context, row *models.UpstreamTask) (*upstream.Upstream, string, error) {
	if row == nil || row.State == models.UpstreamTaskNone {
		return nil, "", nil
	}
	u := s.Engine.Registry().Current().ByName(row.Upstream)
	if u == nil || u.Tasks() == nil {
		slog.Warn("tasks: the upstream of a submission is no longer configured", "owner", row.OwnerID, "upstream", row.Upstream)
		return nil, "", errLostSubmission
	}
	if row.State == models.UpstreamTaskSubmitted {
		return u, row.TaskID, nil
	}
	f, ok := u.Tasks().(upstream.Finder)
	var found *upstream.Task
	var err error
	if ok {
		fctx, cancel := context.WithTimeout(ctx, u.SoftTimeout)
		found, err = f.Find(fctx, upstream.Media(row.Media), row.Ref)
		cancel()
	}
	if !ok || errors.Is(err, upstream.ErrNotFindable) {
		slog.Warn("tasks: a submission was interrupted before its answer; the provider cannot find it by reference", "owner", row.OwnerID, "upstream", row.Upstream)
		return nil, "", errLostSubmission
	}
	if err != nil {
		return nil, "", fmt.Errorf("jobs: look up the submission of %s: %w", row.OwnerID, err)
	}
	if found == nil {
		if err := s.App.Jobs().UpstreamSubmitRefused(ctx, row.OwnerID); err != nil {
			return nil, "", err
		}
		return nil, "", nil
	}
	if err := s.App.Jobs().UpstreamSubmitted(ctx, row.OwnerID, u.Name, found.ID); err != nil {
		return nil, "", err
	}
	return u, found.ID, nil
}

// pollTask asks the upstream for the state of a task once, under its soft time-out. A revoked key or an
// unpaid account takes the upstream out of rotation (the task itself is polled again until its deadline:
// the key may be restored or replaced in the upstreams file meanwhile).
func (s *Service) pollTask(ctx context.Context, u *upstream.Upstream, m upstream.Media, id string) (*upstream.Task, error) {
	pctx, cancel := context.WithTimeout(ctx, u.SoftTimeout)
	defer cancel()
	t, err := u.Tasks().Poll(pctx, m, id)
	s.Engine.Polled(ctx, u.Name, err)
	return t, err
}

// lostTask reports whether a poll's error says the provider no longer knows the task.
func lostTask(err error) bool {
	var ue *upstream.Error
	return errors.As(err, &ue) && (ue.Status == http.StatusNotFound || ue.Status == http.StatusGone)
}

// retryDelay is how long to wait before polling again after err (the upstream's Retry-After when longer).
func retryDelay(err error, every time.Duration) time.Duration {
	var ue *upstream.Error
	if errors.As(err, &ue) && ue.RetryAfter > every {
		return min(ue.RetryAfter, 5*time.Minute)
	}
	return every
}

// taskFailure is the tenant's message of a task that failed at its upstream.
func taskFailure(t *upstream.Task) string {
	if t.Err != nil && t.Err.Class == upstream.ClassRefused {
		return upstream.RefusedMessage
	}
	return "generation failed; credits refunded, you may resubmit"
}

// openOutput opens the first output of a succeeded task: its bytes, or a download through the upstream
// (whose revoked key takes it out of rotation, as a poll's does).
func (s *Service) openOutput(ctx context.Context, u *upstream.Upstream, t *upstream.Task) (io.ReadCloser, error) {
	if len(t.Outputs) == 0 {
		return nil, errors.New("the task succeeded without an output")
	}
	out := t.Outputs[0]
	if out.Data != nil {
		return io.NopCloser(bytes.NewReader(out.Data)), nil
	}
	body, err := u.Tasks().Open(ctx, out)
	s.Engine.Polled(ctx, u.Name, err)
	return body, err
}

// cancelTask asks an upstream to cancel a task, logging a failure (best effort).
func (s *Service) cancelTask(ctx context.Context, owner, name string, m upstream.Media, taskID string) {
	if name == "" || taskID == "" {
		return
	}
	u := s.Engine.Registry().Current().ByName(name)
	if u == nil || u.Tasks() == nil {
		slog.Warn("tasks: cannot cancel at the upstream: it is no longer configured", "owner", owner, "upstream", name)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
	defer cancel()
	if err := u.Tasks().Cancel(ctx, m, taskID); err != nil {
		slog.Warn("tasks: cancelling at the upstream failed", "owner", owner, "upstream", name, "err", err)
	}
}
