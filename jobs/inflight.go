package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river/rivertype"

	"studio/jobs/routing"
	"studio/models"
	"studio/models/metrics"
)

// Generations in flight (README: "Running in production", "Generations in flight"). A queued image job
// is picked up by a short run of the queue, which claims it for this process (models.RunnerService) and
// hands it to a goroutine of its own: the goroutine makes the upstream call (or the submission to a task
// protocol) and commits the result when it comes, holding no queue worker and no database connection
// while it waits. A replica's capacity is then its memory and its upstreams' max_concurrency, not a
// number of workers. What a run of the queue used to return tells the goroutine what to do next: a
// snooze (a task submitted, to poll; a hand-back) or an error of the service's own (storage) queues the
// job again (RunnerService.Release); a job that ended needs nothing more.
//
// The process keeps its row in job_runners fresh every RunnerBeat. If it dies, its jobs stay claimed by
// a runner that no longer beats, and the queue's rescue pass (every rescueInterval, on the leader) queues
// them again: a synchronous call is then made again, a task already submitted is polled, never submitted
// twice (tasks.go). A process that stops lets its calls finish for the shutdown grace, then hands back
// the ones still waiting in one transaction.

// rescueInterval is how often the leader queues again the jobs of processes that died.
const rescueInterval = 5 * time.Second

// releaseRetry is when a job whose run failed for the service's own reasons (storage) runs again.
const releaseRetry = 5 * time.Second

// inflight holds the generations of this process that wait on their upstreams.
type inflight struct {
	s  *Service
	id string // this process's name in job_runners and in the jobs it holds

	base   context.Context // every generation's context; cancelled when the shutdown grace is over
	cancel context.CancelFunc
	wg     sync.WaitGroup
	count  atomic.Int64

	mu       sync.Mutex
	started  bool
	stopping bool
	closed   bool     // stop handed back what it held: a job held later is handed back by whoever holds it
	back     []string // jobs to hand back when stopping
	unsent   []string // jobs whose release failed, tried again on the next beat
}

func newInflight(s *Service) *inflight {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &inflight{s: s, id: hex.EncodeToString(b[:])}
}

// inflightKey marks the context of a generation running in its own goroutine (runBudget: no run budget).
type inflightKey struct{}

func heldOutsideQueue(ctx context.Context) bool {
	held, _ := ctx.Value(inflightKey{}).(bool)
	return held
}

// start announces this process and keeps its row fresh until ctx ends; it also tells routing how many
// processes share each max_concurrency.
func (in *inflight) start(ctx context.Context) error {
	in.base, in.cancel = context.WithCancel(ctx)
	// The heartbeat uses the requests' pool: behind a backlog of completions in the small work pool it
	// could come late enough for this process to look dead, and its jobs to be run a second time.
	hb := models.RequestContext(ctx)
	if err := in.s.App.Runners().Beat(hb, in.id); err != nil {
		return err
	}
	in.beat(ctx)
	in.mu.Lock()
	in.started = true
	in.mu.Unlock()
	go func() {
		t := time.NewTicker(models.RunnerBeat)
		defer t.Stop()
		for {
			select {
			case <-in.base.Done(): // stopping: stop hands back what is left and leaves job_runners
				return
			case <-t.C:
			}
			if err := in.s.App.Runners().Beat(hb, in.id); err != nil && ctx.Err() == nil {
				slog.Warn("jobs: heartbeat of the generations in flight failed", "err", err)
			}
			in.beat(ctx)
		}
	}()
	return nil
}

// beat updates the processes sharing the upstreams' bounds and retries the releases that failed.
func (in *inflight) beat(ctx context.Context) {
	if n, err := in.s.App.Runners().Live(models.RequestContext(ctx)); err == nil {
		in.s.Engine.SetProcesses(n)
	}
	in.mu.Lock()
	unsent := in.unsent
	in.unsent = nil
	in.mu.Unlock()
	if len(unsent) > 0 {
		in.release(ctx, releaseRetry, unsent...)
	}
}

// take claims a pending job that needs an upstream call for this process and runs it in a goroutine;
// the queue's run ends at once. It reports false when the job is not one to take (ended, held by another
// process, or its provider's task is to be polled).
func (in *inflight) take(ctx context.Context, jobID string) (bool, error) {
	in.mu.Lock()
	stopping := in.stopping
	in.mu.Unlock()
	if stopping {
		return true, handBack("image job", jobID, errors.New("this process is stopping"))
	}
	j, begun, err := in.s.App.Runners().Claim(ctx, jobID, in.id)
	if err != nil || j == nil {
		return false, err
	}
	if back := in.run([]*models.Job{j}, begun); len(back) > 0 {
		// stop handed back what it held meanwhile: this job too, in this run
		return true, in.s.App.Runners().Release(ctx, in.id, handBackDelay, back...)
	}
	return true, nil
}

// Holding is models.Holder's: the runner name under which submits store their jobs held by this
// process, while it runs and does not stop; "" otherwise (the jobs are queued).
func (in *inflight) Holding() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.started || in.stopping || in.s.Draining() {
		return ""
	}
	return in.id
}

// Hold is models.Holder's: it runs the jobs a submit committed held by this process. When this process
// stopped meanwhile, they are handed back to the queue.
func (in *inflight) Hold(runner string, jobs []*models.Job) {
	if runner != in.id || len(jobs) == 0 {
		return
	}
	if back := in.run(jobs, false); len(back) > 0 {
		in.release(models.WorkContext(context.Background()), handBackDelay, back...)
	}
}

// run starts a goroutine for each job this process holds (begun: a submission of it was begun, to look
// up before anything is sent again). Once stop began, the jobs are handed back with the others instead;
// once stop handed those back, run returns the jobs for its caller to hand back.
func (in *inflight) run(jobs []*models.Job, begun bool) (back []string) {
	in.mu.Lock()
	if in.stopping {
		for _, j := range jobs {
			back = append(back, j.ID)
		}
		if !in.closed {
			in.back = append(in.back, back...)
			back = nil
		}
		in.mu.Unlock()
		return back
	}
	in.wg.Add(len(jobs))
	in.mu.Unlock()
	in.count.Add(int64(len(jobs)))
	metrics.GenerationsWaiting.Add(float64(len(jobs)))
	for _, j := range jobs {
		go func() {
			defer func() {
				in.count.Add(-1)
				metrics.GenerationsWaiting.Dec()
				in.wg.Done()
			}()
			ctx := context.WithValue(in.base, inflightKey{}, true)
			var row *models.UpstreamTask // nil: runImageJob reads the submission begun
			if !begun {
				row = &models.UpstreamTask{OwnerID: j.ID}
			}
			in.settle(j.ID, in.s.runImageJob(ctx, j, row))
		}()
	}
	return nil
}

// settle acts on how a generation's run ended: nothing more when its job ended, else the job is handed
// back to the queue (to poll its task, to retry, or because this process stops).
func (in *inflight) settle(jobID string, err error) {
	if err == nil {
		return
	}
	delay := releaseRetry
	var snooze *rivertype.JobSnoozeError
	if errors.As(err, &snooze) {
		delay = snooze.Duration
	} else {
		slog.Warn("jobs: a generation failed for the service's own reasons; queued again", "job_id", jobID, "err", err)
	}
	if in.base.Err() != nil {
		in.mu.Lock()
		in.back = append(in.back, jobID)
		in.mu.Unlock()
		return
	}
	in.release(context.WithoutCancel(in.base), delay, jobID)
}

// release hands jobs back to the queue; one that cannot be now is tried again on the next beat.
func (in *inflight) release(ctx context.Context, delay time.Duration, ids ...string) {
	if err := in.s.App.Runners().Release(ctx, in.id, delay, ids...); err != nil {
		slog.Error("jobs: handing generations back to the queue failed; retrying", "count", len(ids), "err", err)
		in.mu.Lock()
		in.unsent = append(in.unsent, ids...)
		in.mu.Unlock()
	}
}

// stop lets the generations in flight finish until ctx ends, then cancels the others and hands their
// jobs back to the queue in one transaction, and leaves job_runners.
func (in *inflight) stop(ctx context.Context) {
	if in.cancel == nil {
		return
	}
	in.mu.Lock()
	in.stopping = true // from now on no goroutine is added (take)
	in.mu.Unlock()
	done := make(chan struct{})
	go func() {
		in.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		slog.Info("jobs: shutdown grace over; handing the generations in flight back to the queue", "count", in.count.Load())
	}
	in.cancel()
	<-done
	in.mu.Lock()
	back := append(in.back, in.unsent...)
	in.back, in.unsent = nil, nil
	in.closed = true
	in.mu.Unlock()
	bctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(back) > 0 {
		if err := in.s.App.Runners().Release(models.WorkContext(bctx), in.id, handBackDelay, back...); err != nil {
			slog.Error("jobs: handing generations back failed; the rescue pass of another replica queues them", "count", len(back), "err", err)
		}
	}
	if err := in.s.App.Runners().Leave(models.WorkContext(bctx), in.id); err != nil {
		slog.Warn("jobs: leaving job_runners failed", "err", err)
	}
}

// stretchCtx is a job's context whose deadline moves: to SlotWaitLimit while the job waits for a slot
// of its upstream's max_concurrency, then to the job deadline counted from the slot (slotWaiter). When it
// passes, Err is context.DeadlineExceeded, as for context.WithDeadline.
type stretchCtx struct {
	context.Context
	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
}

func newStretchCtx(parent context.Context, deadline time.Time) (*stretchCtx, context.CancelFunc) {
	inner, cancel := context.WithCancelCause(parent)
	c := &stretchCtx{Context: inner, deadline: deadline}
	c.timer = time.AfterFunc(time.Until(deadline), func() { cancel(context.DeadlineExceeded) })
	return c, func() {
		c.timer.Stop()
		cancel(context.Canceled)
	}
}

// Deadline returns the current deadline.
func (c *stretchCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

// Err is context.DeadlineExceeded once the deadline passed, else the parent's end.
func (c *stretchCtx) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// move sets a new deadline, unless the context already ended.
func (c *stretchCtx) move(deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Context.Err() != nil {
		return
	}
	c.deadline = deadline
	c.timer.Reset(time.Until(deadline))
}

// slotWaiter moves a held job's deadline while it waits for a slot (routing.SlotWaiter).
type slotWaiter struct {
	s   *Service
	j   *models.Job
	ctx *stretchCtx
}

func (w *slotWaiter) Waiting() {
	w.move(w.s.App.Runners().WaitForSlot(context.WithoutCancel(w.ctx), w.j.ID))
}

func (w *slotWaiter) Acquired() {
	w.move(w.s.App.Runners().SlotTaken(context.WithoutCancel(w.ctx), w.j.ID))
}

// move gives the job and its context the deadline the core recorded (or would have: a failed write is
// logged, and the sweep then sees the old deadline).
func (w *slotWaiter) move(d time.Time, err error) {
	if err != nil {
		slog.Warn("jobs: recording a job's wait for a slot failed", "job_id", w.j.ID, "err", err)
	}
	w.j.Deadline = d
	w.ctx.move(d)
}

// jobContext bounds the run of a job until runUntil. A generation held outside the queue gets a deadline
// that waiting for a slot moves (stretchCtx, slotWaiter); a run of the queue gets a fixed one.
func (s *Service) jobContext(ctx context.Context, j *models.Job, runUntil time.Time) (context.Context, context.CancelFunc) {
	ctx = withJob(ctx, j.ID)
	if !heldOutsideQueue(ctx) {
		return context.WithDeadline(ctx, runUntil)
	}
	sc, cancel := newStretchCtx(ctx, runUntil)
	sc.Context = routing.WithSlotWaiter(sc.Context, &slotWaiter{s: s, j: j, ctx: sc})
	return sc, cancel
}
