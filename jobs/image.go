package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"studio/jobs/internal/calls"
	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/media"
	"studio/models/metrics"
)

// imageRoute is the routing request of image parameters.
func imageRoute(p *models.ImageParams) routing.Request {
	req := routing.Request{Media: upstream.MediaImage, Model: p.Model, Provider: p.Provider, Binding: p.Binding}
	for _, c := range p.Capabilities() {
		req.Needs = append(req.Needs, upstream.Capability(c))
	}
	return req
}

// PlanImage answers the core (models.Router) whether routing can serve an image request now: 400
// 当前无可用上游 before anything is charged when no upstream can.
func (r router) PlanImage(p *models.ImageParams) error {
	_, err := r.s.Engine.Plan(imageRoute(p))
	return calls.RouteError(err)
}

// imageWorker runs one image job to its end: done with a stored result, or failed and refunded.
type imageWorker struct {
	river.WorkerDefaults[ImageJobArgs]
	s *Service
}

// NextRetry retries a run that failed for the service's own reasons (database, storage) soon: the job's
// deadline, not the queue's back-off, bounds how long it may take.
func (w *imageWorker) NextRetry(job *river.Job[ImageJobArgs]) time.Time {
	d := time.Duration(1<<min(job.Attempt, 5)) * time.Second
	return time.Now().Add(d)
}

// Work runs one step of an image job. A job that needs an upstream call is claimed for this process and
// handed to a goroutine that holds it while the call waits (inflight.take), so the run ends at once; a
// job whose task a provider accepted is polled here, once per run (snoozed in between).
func (w *imageWorker) Work(ctx context.Context, job *river.Job[ImageJobArgs]) error {
	s := w.s
	if taken, err := s.inflight.take(ctx, job.Args.JobID); taken || err != nil {
		return err
	}
	j, err := s.App.Jobs().Job(ctx, job.Args.JobID)
	if err != nil {
		if models.KindOf(err) == models.KindNotFound {
			return nil
		}
		return err
	}
	if j.Status != models.JobPending {
		return nil
	}
	row, err := s.App.Jobs().UpstreamTaskOf(ctx, j.ID)
	if err != nil || row == nil || row.State != models.UpstreamTaskSubmitted {
		return err // held by another process
	}
	return s.runImageJob(ctx, j, row)
}

// runImageJob generates the image of a pending job (row: its upstream task, when the caller read it).
// Failures of the generation end the job (failed, refunded); failures of the service's own storage are
// returned so that the job runs again.
func (s *Service) runImageJob(ctx context.Context, j *models.Job, row *models.UpstreamTask) error {
	app := s.App
	if j.Status != models.JobPending {
		return nil
	}
	if row == nil {
		var err error
		if row, err = app.Jobs().UpstreamTaskOf(ctx, j.ID); err != nil {
			return err
		}
	}
	if !app.Now().Before(j.Deadline) {
		if row != nil && row.State == models.UpstreamTaskSubmitted {
			s.cancelTask(ctx, j.ID, row.Upstream, upstream.MediaImage, row.TaskID)
		}
		return app.Jobs().FailJob(ctx, j.ID, fmt.Sprintf("generation timed out after %s; credits refunded", app.Config.JobDeadline))
	}
	runUntil := j.Deadline
	if budget := app.Now().Add(runBudget(ctx, app.Config.JobDeadline)); budget.Before(runUntil) {
		runUntil = budget
	}
	ctx, cancel := s.jobContext(ctx, j, runUntil)
	defer cancel()
	p, err := j.JobParams()
	if err != nil {
		return app.Jobs().FailJob(ctx, j.ID, "the job's parameters are unreadable; credits refunded")
	}
	start := time.Now()
	if row != nil && row.State != models.UpstreamTaskNone {
		// An earlier run submitted the image to an upstream task protocol: follow that task.
		u, taskID, err := s.resumeSubmission(ctx, row)
		switch {
		case errors.Is(err, errLostSubmission):
			return app.Jobs().FailJob(context.WithoutCancel(ctx), j.ID, lostSubmissionMessage)
		case err != nil:
			return err
		case u != nil:
			return s.pollImage(ctx, j, u, taskID)
		}
	}
	if j.Kind == models.JobKindImageToTemplate {
		return s.runImageToTemplate(ctx, j, p)
	}
	if p.SpecMD != "" {
		prompt, err := s.expandSpec(ctx, "image", p.SpecMD, p.SpecInput, func(note string) {
			_ = app.Jobs().SetJobProgress(context.WithoutCancel(ctx), j.ID, note)
		})
		if err != nil {
			return s.failGeneration(ctx, j, err)
		}
		p.Prompt = prompt
		if err := app.Jobs().SetJobStep(ctx, j.ID, 1); err != nil {
			return err
		}
	}
	req, err := s.imageRequest(ctx, &p)
	if err != nil {
		return app.Jobs().FailJob(ctx, j.ID, err.Error())
	}
	var img *upstream.Image
	var used *upstream.Upstream
	var task *submitted
	started := false
	err = s.Engine.Run(ctx, imageRoute(&p), func(note string) { _ = app.Jobs().SetJobProgress(context.WithoutCancel(ctx), j.ID, note) },
		func(ctx context.Context, u *upstream.Upstream) error {
			if !started {
				started = true
				metrics.GenerationStart.Observe(app.Now().Sub(j.CreatedAt).Seconds())
			}
			if u.Tasks() != nil {
				out, err := s.submitTask(ctx, j.ID, u, upstream.TaskRequest{Media: upstream.MediaImage, Image: req})
				if err == nil {
					task = out
				}
				return err
			}
			out, err := u.Image().GenerateImage(ctx, req)
			if err == nil {
				img, used = out, u
			}
			return err
		})
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) || (ctx.Err() != nil && app.Now().Before(j.Deadline)) {
			// This process is stopping, or this run used its budget while the job still has time:
			// leave the job pending for the queue to run again.
			return handBack("image job", j.ID, ctx.Err())
		}
		return s.failGeneration(ctx, j, err)
	}
	if task != nil {
		return s.imageTaskState(ctx, j, task.u, task.task)
	}
	return s.completeImage(ctx, j, img, used.CostUSD, time.Since(start))
}

// completeImage stores a generated image and marks the job done.
func (s *Service) completeImage(ctx context.Context, j *models.Job, img *upstream.Image, costUSD float64, elapsed time.Duration) error {
	// Results are spread over 256 folders a day so that no directory becomes a hot spot.
	key, err := media.JoinKey("jobs", j.CreatedAt.UTC().Format("2006-01-02"), j.ID[:2], j.ID+extOf(img.MIME))
	if err != nil {
		return err
	}
	if err := s.storeResult(ctx, key, img); err != nil {
		slog.Error("storing a generated image failed; the queue retries", "job_id", j.ID, "err", err)
		return fmt.Errorf("jobs: store result: %w", err)
	}
	return s.App.Jobs().CompleteJob(context.WithoutCancel(ctx), j, s.media.URL(key), costUSD, elapsed)
}

// maxImageResult bounds a generated image copied from an upstream task into the media store.
const maxImageResult int64 = 64 << 20

// pollImage checks the upstream task of an image job once.
func (s *Service) pollImage(ctx context.Context, j *models.Job, u *upstream.Upstream, taskID string) error {
	t, err := s.pollTask(ctx, u, upstream.MediaImage, taskID)
	if err != nil {
		if lostTask(err) {
			slog.Warn("image: the upstream lost the task", "job_id", j.ID, "upstream", u.Name, "err", err)
			return s.App.Jobs().FailJob(context.WithoutCancel(ctx), j.ID, "generation failed; credits refunded, you may resubmit")
		}
		slog.Warn("image: polling the upstream failed; polling again", "job_id", j.ID, "upstream", u.Name, "err", err)
		return waitAgain(ctx, retryDelay(err, s.opts.ImagePoll))
	}
	return s.imageTaskState(ctx, j, u, t)
}

// imageTaskState acts on the state of an image job's upstream task: it stores a succeeded one's image
// at once, fails a failed one with its refund, and otherwise notes the progress and polls again later.
func (s *Service) imageTaskState(ctx context.Context, j *models.Job, u *upstream.Upstream, t *upstream.Task) error {
	switch t.Status {
	case upstream.TaskSucceeded:
		body, err := s.openOutput(ctx, u, t)
		if err != nil {
			slog.Warn("image: downloading the result failed; polling again", "job_id", j.ID, "upstream", u.Name, "err", err)
			return river.JobSnooze(s.opts.ImagePoll)
		}
		data, err := io.ReadAll(io.LimitReader(body, maxImageResult+1))
		body.Close()
		if err != nil {
			slog.Warn("image: reading the result failed; polling again", "job_id", j.ID, "upstream", u.Name, "err", err)
			return river.JobSnooze(s.opts.ImagePoll)
		}
		k, derr := media.Detect(data)
		if derr != nil || k.Type != media.Image || int64(len(data)) > maxImageResult {
			slog.Warn("image: the upstream's result is unusable", "job_id", j.ID, "upstream", u.Name, "err", derr, "size", len(data))
			return s.App.Jobs().FailJob(context.WithoutCancel(ctx), j.ID, "the generated image could not be used; credits refunded, you may resubmit")
		}
		return s.completeImage(ctx, j, &upstream.Image{Data: data, MIME: k.MIME}, u.CostUSD, s.App.Now().Sub(j.CreatedAt))
	case upstream.TaskFailed, upstream.TaskCancelled:
		slog.Warn("image: the upstream failed the task", "job_id", j.ID, "upstream", u.Name, "detail", t.Err)
		return s.App.Jobs().FailJob(context.WithoutCancel(ctx), j.ID, taskFailure(t))
	}
	note := "generating"
	if t.Progress > 0 && t.Progress < 100 {
		note = fmt.Sprintf("generating (%d%%)", t.Progress)
	}
	_ = s.App.Jobs().SetJobProgress(context.WithoutCancel(ctx), j.ID, note)
	return waitAgain(ctx, s.opts.ImagePoll)
}

// storeResult writes a generated image to the media store, at most putConcurrency at once.
func (s *Service) storeResult(ctx context.Context, key string, img *upstream.Image) error {
	select {
	case s.stores <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.stores }()
	return s.media.Put(ctx, key, bytes.NewReader(img.Data), int64(len(img.Data)), img.MIME)
}

// failGeneration ends a job after routing gave up: the message says what happened without naming upstreams.
// A run that was only interrupted (this process is stopping, or the run used its budget while the job
// still has time: a prompt expansion or a picture reading that outlasted RunBudget) hands the job back.
func (s *Service) failGeneration(ctx context.Context, j *models.Job, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) || (ctx.Err() != nil && s.App.Now().Before(j.Deadline)) {
		return handBack("image job", j.ID, ctx.Err())
	}
	msg := err.Error()
	switch {
	case errors.Is(err, errLostSubmission):
		msg = lostSubmissionMessage
	case upstream.ClassOf(err) == upstream.ClassRefused:
		slog.Warn("image refused by the upstream's moderation", "job_id", j.ID, "err", err)
		msg = upstream.RefusedMessage
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		msg = fmt.Sprintf("generation timed out after %s; credits refunded", s.App.Config.JobDeadline)
	case errors.Is(err, routing.ErrNoUpstream):
		msg = models.NoUpstreamMessage + ": no upstream can serve this request now; credits refunded"
	default:
		var re *routing.RunError
		if errors.As(err, &re) {
			slog.Warn("generation failed", "job_id", j.ID, "detail", re.Detail())
		}
		msg += "; credits refunded, you may resubmit"
	}
	return s.App.Jobs().FailJob(context.WithoutCancel(ctx), j.ID, msg)
}

// imageRequest fetches the reference pictures of a job (this service's own media or public URLs).
func (s *Service) imageRequest(ctx context.Context, p *models.ImageParams) (upstream.ImageRequest, error) {
	req := upstream.ImageRequest{Prompt: p.Prompt, Ratio: p.Ratio, Resolution: p.Resolution, Background: p.Background}
	if p.QualityExplicit || p.Quality != "" {
		req.Quality = p.Quality
	}
	for i, u := range p.ReferenceImages {
		b, err := s.fetchImage(ctx, u)
		if err != nil {
			return req, fmt.Errorf("reference_images[%d] could not be read (%v); credits refunded", i, err)
		}
		req.ReferenceImages = append(req.ReferenceImages, b)
	}
	if p.ImageURL != "" {
		b, err := s.fetchImage(ctx, p.ImageURL)
		if err != nil {
			return req, fmt.Errorf("image_url could not be read (%v); credits refunded", err)
		}
		m, err := s.fetchImage(ctx, p.Mask)
		if err != nil {
			return req, fmt.Errorf("mask could not be read (%v); credits refunded", err)
		}
		req.Image, req.Mask = b, m
	}
	return req, nil
}

// fetchImage reads an image from the media store when the URL is ours, otherwise over the safe client.
func (s *Service) fetchImage(ctx context.Context, rawURL string) ([]byte, error) {
	if key, ok := s.media.KeyFromURL(rawURL); ok {
		rc, _, err := s.media.Open(ctx, key)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		b, _, err := media.ReadAll(rc, media.Detect)
		return b, err
	}
	b, _, err := media.Fetch(ctx, s.client, rawURL, media.MaxImageSize)
	if err != nil {
		return nil, err
	}
	if _, err := media.Detect(b); err != nil {
		return nil, err
	}
	return b, nil
}

// expandSpec turns a spec-mode template (image or video) and the caller's sentence into a full prompt
// through a chat upstream; progress receives the routing notes (nil: none).
func (s *Service) expandSpec(ctx context.Context, media, spec, sentence string, progress func(note string)) (string, error) {
	var prompt string
	err := s.Engine.Run(ctx, routing.Request{Media: upstream.MediaChat}, progress, func(ctx context.Context, u *upstream.Upstream) error {
		res, err := u.Chat().Chat(ctx, upstream.ChatRequest{Messages: []upstream.Message{
			{Role: "system", Content: spec + "\n\nWrite one complete " + media + " prompt that follows this specification for the user's description. Answer with the prompt only."},
			{Role: "user", Content: sentence},
		}})
		if err == nil {
			prompt = strings.TrimSpace(res.Content)
		}
		return err
	})
	if err == nil && prompt == "" {
		err = errors.New("the prompt expansion came back empty")
	}
	return prompt, err
}

func extOf(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/webp":
		return ".webp"
	}
	return ".bin"
}
