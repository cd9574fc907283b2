package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"studio/jobs/internal/calls"
	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/contract"
	"studio/models/media"
)

// Video tasks on the queue: the task's queued work starts it at an upstream through the routing engine
// (fallback keeps the tier), then polls the upstream once per run and snoozes for videoPollDelay
// between runs (the queue runs it again then), so that no worker waits minutes. A completed video is
// streamed into the media store; an upstream failure, a lost task or the deadline fails the task with
// a refund.

// MaxVideoResult bounds a generated video copied into the media store.
const MaxVideoResult int64 = 1 << 30

// cancelTimeout bounds the best-effort cancellation of a task at its upstream.
const cancelTimeout = 10 * time.Second

// VideoTaskArgs queues the next step of one video task.
type VideoTaskArgs struct {
	TaskID string `json:"task_id"`
}

// Kind names the work.
func (VideoTaskArgs) Kind() string { return string(models.WorkVideoTask) }

// cancelUpstream asks an upstream to cancel its task, logging a failure; it does nothing without a task.
func (s *Service) cancelUpstream(ctx context.Context, taskID, name, upstreamTaskID string) {
	s.cancelTask(ctx, taskID, name, upstream.MediaVideo, upstreamTaskID)
}

// videoRoute is the routing request of a video task: its tier, length, resolution and capabilities.
func videoRoute(tier string, duration int, resolution string, p *models.VideoParams) routing.Request {
	req := routing.Request{Media: upstream.MediaVideo, Tier: tier, Duration: duration, Resolution: resolution, Binding: p.Binding}
	for _, c := range p.Capabilities() {
		req.Needs = append(req.Needs, upstream.Capability(c))
	}
	return req
}

// PlanVideo answers the core (models.Router) whether routing can serve a video request of tier now.
func (r router) PlanVideo(tier string, duration int, resolution string, p *models.VideoParams) error {
	_, err := r.s.Engine.Plan(videoRoute(tier, duration, resolution, p))
	return calls.RouteError(err)
}

// videoWorker advances one video task by one step: start, or one poll.
type videoWorker struct {
	river.WorkerDefaults[VideoTaskArgs]
	s *Service
}

func (w *videoWorker) Work(ctx context.Context, job *river.Job[VideoTaskArgs]) error {
	return w.s.runVideoTask(ctx, job.Args.TaskID)
}

// runVideoTask starts a pending task or polls a running one; while the task goes on it returns a
// snooze, so that the queue runs it again after videoPollDelay. Failures of the generation end the
// task (failed, refunded); failures of the service's own database or storage are returned so that the
// queue runs the step again.
func (s *Service) runVideoTask(ctx context.Context, taskID string) error {
	t, err := s.App.Videos().VideoTask(ctx, taskID)
	if err != nil {
		if models.KindOf(err) == models.KindNotFound {
			return nil
		}
		return err
	}
	if t.Ended() {
		return nil
	}
	deadline := s.App.Videos().VideoDeadline(t)
	if !s.App.Now().Before(deadline) {
		s.cancelUpstream(ctx, t.ID, t.Upstream, t.UpstreamTaskID)
		return s.failVideo(ctx, t, fmt.Sprintf("video generation timed out after %s; credits refunded", s.App.Config.JobDeadline))
	}
	runUntil := deadline
	if budget := s.App.Now().Add(runBudget(ctx, s.App.Config.JobDeadline)); budget.Before(runUntil) {
		runUntil = budget
	}
	ctx, cancel := context.WithDeadline(withJob(ctx, t.ID), runUntil)
	defer cancel()
	p, err := t.VideoParams()
	if err != nil {
		return s.failVideo(ctx, t, "the task's parameters are unreadable; credits refunded")
	}
	if t.Status == models.VideoPending {
		row, err := s.App.Jobs().UpstreamTaskOf(ctx, t.ID)
		if err != nil {
			return err
		}
		u, upstreamTaskID, err := s.resumeSubmission(ctx, row)
		switch {
		case errors.Is(err, errLostSubmission):
			return s.failVideo(ctx, t, lostSubmissionMessage)
		case err != nil:
			return err
		case u != nil:
			return s.recordStart(ctx, t, u, upstreamTaskID, 0)
		}
		return s.startVideo(ctx, t, &p, deadline)
	}
	return s.pollVideo(ctx, t, deadline)
}

// startVideo starts the task at an upstream of its tier and records which one took it.
func (s *Service) startVideo(ctx context.Context, t *models.VideoTask, p *models.VideoParams, deadline time.Time) error {
	if p.SpecMD != "" {
		prompt, err := s.expandSpec(ctx, "video", p.SpecMD, p.SpecInput, nil)
		if err != nil {
			return s.videoRunFailed(ctx, t, deadline, err)
		}
		p.Prompt = prompt
	}
	req := upstream.VideoRequest{Prompt: p.Prompt, Tier: t.Model, Ratio: t.Ratio, Resolution: t.Resolution, Duration: t.Duration,
		Images: p.Images, Videos: p.Videos, Audios: p.Audios, GenerateAudio: p.GenerateAudio}
	var started *submitted
	err := s.Engine.Run(ctx, videoRoute(t.Model, t.Duration, t.Resolution, p), nil, func(ctx context.Context, u *upstream.Upstream) error {
		r := req
		if tier := routing.AttemptTier(ctx); tier != "" {
			r.Tier = tier
		}
		out, err := s.submitTask(ctx, t.ID, u, upstream.TaskRequest{Media: upstream.MediaVideo, Video: r})
		if err == nil {
			started = out
		}
		return err
	})
	if err != nil {
		return s.videoRunFailed(ctx, t, deadline, err)
	}
	return s.recordStart(ctx, t, started.u, started.task.ID, started.task.Progress)
}

// recordStart marks the task running at the upstream that took it (its task id is already recorded
// with the submission, so a crash here resumes polling it), then polls it later.
func (s *Service) recordStart(ctx context.Context, t *models.VideoTask, u *upstream.Upstream, upstreamTaskID string, progress int) error {
	ok, err := s.App.Videos().StartVideoTask(context.WithoutCancel(ctx), t.ID, u.Name, upstreamTaskID, progress)
	if err != nil {
		slog.Error("video: recording a started task failed; the queue resumes it", "task_id", t.ID, "err", err)
		return err
	}
	if !ok { // cancelled while it was being started
		s.cancelUpstream(context.WithoutCancel(ctx), t.ID, u.Name, upstreamTaskID)
		return nil
	}
	return s.pollLater(ctx, t)
}

// pollLater asks the queue to run the task's work again for one poll, after videoPollDelay.
func (s *Service) pollLater(ctx context.Context, t *models.VideoTask) error {
	return waitAgain(ctx, s.videoPollDelay(t))
}

// videoPollDelay is the wait before the next poll of a running task. A video takes minutes, and
// polling ten thousand of them every few seconds is most of a replica's work for nothing: a task is
// polled every VideoPoll in its first polls (an early failure) and when it may have ended, and seldom
// while it surely runs: half the time left until its tier's expected end (contract.ExpectedVideoTime),
// and past that end a quarter of the time it is late, each at least VideoPoll and at most VideoPollMax.
// A two-minute video is polled about ten times instead of twenty-four; its end is seen within VideoPoll
// when it comes near the expected time.
func (s *Service) videoPollDelay(t *models.VideoTask) time.Duration {
	return pollDelay(s.opts.VideoPoll, s.opts.VideoPollMax, s.App.Now().Sub(t.CreatedAt), contract.ExpectedVideoTime(t.Model, t.Duration))
}

// pollDelay is videoPollDelay's rule for a task elapsed into its run, expected to end after expected.
func pollDelay(every, most, elapsed, expected time.Duration) time.Duration {
	if most <= every || elapsed < 2*every {
		return every
	}
	d := (expected - elapsed) / 2
	if elapsed > expected {
		d = (elapsed - expected) / 4
	}
	return min(max(d, every), most)
}

// progressed records a running task's progress (reported by the upstream, 0 when it gives none) and
// polls it again later, unless it ended meanwhile.
func (s *Service) progressed(ctx context.Context, t *models.VideoTask, progress int) error {
	running, err := s.App.Videos().VideoProgress(context.WithoutCancel(ctx), t, progress)
	if err != nil || !running {
		return err
	}
	return s.pollLater(ctx, t)
}

// videoRunFailed ends a task whose start or prompt expansion gave up, unless this run was only
// interrupted (shutdown, or its time budget used while the task still has time): then the queue runs
// the step again.
func (s *Service) videoRunFailed(ctx context.Context, t *models.VideoTask, deadline time.Time, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) || (ctx.Err() != nil && s.App.Now().Before(deadline)) {
		return handBack("video task", t.ID, ctx.Err())
	}
	var msg string
	switch {
	case errors.Is(err, errLostSubmission):
		msg = lostSubmissionMessage
	case upstream.ClassOf(err) == upstream.ClassRefused:
		slog.Warn("video refused by the upstream's moderation", "task_id", t.ID, "err", err)
		msg = upstream.RefusedMessage
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		msg = fmt.Sprintf("video generation timed out after %s; credits refunded", s.App.Config.JobDeadline)
	case errors.Is(err, routing.ErrNoUpstream):
		msg = models.NoUpstreamMessage + ": no upstream can serve this video now; credits refunded"
	default:
		var re *routing.RunError
		if errors.As(err, &re) {
			slog.Warn("video generation failed", "task_id", t.ID, "detail", re.Detail())
			msg = re.Error() + "; credits refunded, you may resubmit"
		} else {
			slog.Warn("video generation failed", "task_id", t.ID, "err", err)
			msg = "video generation failed; credits refunded, you may resubmit"
		}
	}
	return s.failVideo(ctx, t, msg)
}

// pollVideo checks a running task at its upstream once: it stores a completed video, fails a failed
// one, and otherwise records the progress and queues the next poll.
func (s *Service) pollVideo(ctx context.Context, t *models.VideoTask, deadline time.Time) error {
	u := s.Engine.Registry().Current().ByName(t.Upstream)
	if u == nil || u.Tasks() == nil {
		slog.Warn("video: the task's upstream is no longer configured", "task_id", t.ID, "upstream", t.Upstream)
		return s.failVideo(ctx, t, "the video could not be followed to its end; credits refunded, you may resubmit")
	}
	st, err := s.pollTask(ctx, u, upstream.MediaVideo, t.UpstreamTaskID)
	if err != nil {
		if lostTask(err) {
			slog.Warn("video: the upstream lost the task", "task_id", t.ID, "upstream", t.Upstream, "err", err)
			return s.failVideo(ctx, t, "video generation failed; credits refunded, you may resubmit")
		}
		// A passing fault: poll again later; the deadline bounds how long.
		slog.Warn("video: polling the upstream failed; polling again", "task_id", t.ID, "upstream", t.Upstream, "err", err)
		return s.progressedAfter(ctx, t, 0, retryDelay(err, s.opts.VideoPoll))
	}
	switch st.Status {
	case upstream.TaskSucceeded:
		return s.storeVideo(ctx, t, u, st, deadline)
	case upstream.TaskFailed, upstream.TaskCancelled:
		slog.Warn("video: the upstream failed the task", "task_id", t.ID, "upstream", t.Upstream, "detail", st.Err)
		return s.failVideo(ctx, t, strings.Replace(taskFailure(st), "generation failed", "video generation failed", 1))
	}
	return s.progressed(ctx, t, st.Progress)
}

// progressedAfter is progressed with another delay before the next poll.
func (s *Service) progressedAfter(ctx context.Context, t *models.VideoTask, progress int, d time.Duration) error {
	running, err := s.App.Videos().VideoProgress(context.WithoutCancel(ctx), t, progress)
	if err != nil || !running {
		return err
	}
	return waitAgain(ctx, max(d, s.videoPollDelay(t)))
}

// storeVideo streams a completed video from its upstream into the media store under
// videos/<date>/<task id>.mp4 (the extension follows the detected container) and marks the task done.
func (s *Service) storeVideo(ctx context.Context, t *models.VideoTask, u *upstream.Upstream, st *upstream.Task, deadline time.Time) error {
	body, err := s.openOutput(ctx, u, st)
	if err != nil {
		if ctx.Err() != nil && s.App.Now().Before(deadline) {
			return handBack("video task", t.ID, ctx.Err())
		}
		slog.Warn("video: downloading the result failed; polling again", "task_id", t.ID, "upstream", t.Upstream, "err", err)
		return s.progressed(ctx, t, 0)
	}
	defer body.Close()
	prefix, err := media.JoinKey("videos", t.CreatedAt.UTC().Format("2006-01-02"))
	if err != nil {
		return err
	}
	obj, err := media.Ingest(ctx, s.media, prefix, body, media.IngestOptions{Name: t.ID, MaxSize: MaxVideoResult, Detect: detectVideo})
	switch {
	case errors.Is(err, media.ErrUnsupportedType), errors.Is(err, media.ErrTooLarge):
		slog.Warn("video: the upstream's result is unusable", "task_id", t.ID, "upstream", t.Upstream, "err", err)
		s.cancelUpstream(ctx, t.ID, t.Upstream, t.UpstreamTaskID)
		return s.failVideo(ctx, t, "the generated video could not be used; credits refunded, you may resubmit")
	case err != nil && ctx.Err() != nil && s.App.Now().Before(deadline):
		return handBack("video task", t.ID, ctx.Err()) // the download outlasted this run's budget
	case err != nil:
		slog.Error("video: storing the result failed; the queue retries", "task_id", t.ID, "err", err)
		return fmt.Errorf("jobs: store video: %w", err)
	}
	done, err := s.App.Videos().CompleteVideoTask(context.WithoutCancel(ctx), t.ID, obj.URL, u.CostUSD*float64(t.Duration))
	if err != nil {
		return err
	}
	if !done { // cancelled while it was being stored
		if err := s.media.Delete(context.WithoutCancel(ctx), obj.Key); err != nil {
			slog.Warn("video: removing the result of a cancelled task failed", "task_id", t.ID, "key", obj.Key, "err", err)
		}
	}
	return nil
}

// detectVideo accepts only video containers (MP4, QuickTime, WebM) as a generated video.
func detectVideo(head []byte) (media.Kind, error) {
	k, err := media.Detect(head)
	if err != nil {
		return k, err
	}
	if k.Type != media.Video {
		return media.Kind{}, fmt.Errorf("%w: %s is not a video", media.ErrUnsupportedType, k.MIME)
	}
	return k, nil
}

// failVideo ends a task failed with a refund; the reason must not name an upstream.
func (s *Service) failVideo(ctx context.Context, t *models.VideoTask, reason string) error {
	_, err := s.App.Videos().FailVideoTask(context.WithoutCancel(ctx), t.ID, reason)
	return err
}
