package models

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"

	"studio/models/pglisten"
)

// The core produces two kinds of signals for the asynchronous side (package jobs): units of work to run
// later, put on the durable queue inside the transaction that creates them, and events saying a row
// changed, announced after that transaction commits. Their kinds are typed here, on the side that
// produces them; jobs maps them onto its queue and jobs/events delivers them.

// WorkKind names a unit of asynchronous work. The values are the kinds of the queue's stored rows
// (River's job kinds): they must never change.
type WorkKind string

// Kinds of asynchronous work.
const (
	// WorkImage runs one image job (of kind JobKindImage or JobKindImageToTemplate) to its end.
	WorkImage WorkKind = "image_job"
	// WorkCallback delivers the callback of one ended image job.
	WorkCallback WorkKind = "callback"
	// WorkVideoTask advances one video task: it starts it, then polls it.
	WorkVideoTask WorkKind = "video_task"
	// WorkMail sends one e-mail (its Payload, sealed): mail leaves through the queue, never inside the
	// request that asked for it, so that neither its time nor its failure tells the caller anything.
	WorkMail WorkKind = "mail"
)

// Work is a unit of asynchronous work to enqueue: an image job, a callback delivery, a video poll.
type Work struct {
	Kind  WorkKind
	ID    string // the job's or video task's id
	Delay time.Duration
	// Payload is what a unit of work that names no row carries (WorkMail: the sealed message).
	Payload string
}

// Topic names the kind of row whose changes are announced to subscribers (GraphQL subscriptions, the
// console's live lists). The values travel between replicas in PostgreSQL notifications.
type Topic string

// Event topics.
const (
	// TopicJob announces a change of an image job.
	TopicJob Topic = "job"
	// TopicVideo announces a change of a video task.
	TopicVideo Topic = "video"
)

// Enqueuer puts asynchronous work on the durable queue inside the caller's transaction, so that the work
// exists exactly when the rows it works on do (jobs.Service's queue).
type Enqueuer interface {
	Enqueue(tx *gorm.DB, work ...Work) error
}

// Publisher announces that the row id of topic changed, to the subscribers of every replica. The core
// calls it after the change commits, never inside a transaction; it must not block (events.Broker).
type Publisher interface {
	Publish(ctx context.Context, topic Topic, id string)
}

// BindingChecker checks that a tenant binding names a known model family or upstream channel (jobs,
// over the upstream registry); the error says what to name instead.
type BindingChecker interface {
	CheckBinding(model string) error
}

// Router is the routing side of the core's use cases (jobs implements it over its routing engine and
// upstreams): whether an upstream can serve a request now, checked before anything is charged, and the
// generations answered within the request. Its errors are the core's (*Error) where they concern the
// caller: 400 当前无可用上游 for a request no upstream can serve, 503 when every upstream failed.
type Router interface {
	// PlanImage refuses an image request no upstream can serve, or that names an unknown model.
	PlanImage(p *ImageParams) error
	// PlanVideo refuses a video request of tier no upstream can serve.
	PlanVideo(tier string, duration int, resolution string, p *VideoParams) error
	// PlanChat refuses a chat request (an image reading when vision) no upstream can serve.
	PlanChat(vision bool) error
	// Chat asks the chat upstreams of the routing chain, in turn, for one completion; accept reads the
	// answer, and an answer it refuses counts as that upstream's failure. what names the operation in errors.
	Chat(ctx context.Context, what string, msgs []ChatMessage, json bool, accept func(answer string) error) error
	// ReadPicture asks the vision upstreams of the chain, in turn, to read a picture, as Chat does.
	ReadPicture(ctx context.Context, what string, img []byte, mime, instruction string, accept func(answer string) error) error
	// FetchPicture reads the picture of an image reading's image_url (the media store's own, or a public URL).
	FetchPicture(ctx context.Context, rawURL string) ([]byte, string, error)
	// CancelUpstream cancels a video task at its upstream, best effort (failures are logged).
	CancelUpstream(ctx context.Context, taskID, upstreamName, upstreamTaskID string)
	// Catalogue lists the image channels and the video tiers with whether an upstream in rotation serves them.
	Catalogue() ([]ModelChannel, map[string]bool)
	// Relay answers an OpenAI chat/completions body, writing the answer (a stream or a JSON body) to w.
	Relay(ctx context.Context, id *Identity, body []byte, w http.ResponseWriter) error
	// ChatModels lists the models the relay accepts.
	ChatModels() []string
}

// Follower streams the changes of jobs and video tasks to a subscriber (jobs/events).
type Follower interface {
	FollowJob(ctx context.Context, id *Identity, jobID string) (<-chan *JobView, error)
	FollowJobs(ctx context.Context, id *Identity) (<-chan *JobView, error)
	FollowVideo(ctx context.Context, id *Identity, taskID string) (<-chan *VideoTaskView, error)
}

// Holder runs image jobs in this process from the moment their submit commits (jobs/inflight.go), so
// that a job's upstream call does not wait for the queue to pick it up. A submit writes the process's
// name in its jobs' runner column instead of queuing them; the process then holds them as it holds the
// jobs it claims from the queue (RunnerService), and if it dies first, the rescue pass queues them.
type Holder interface {
	// Holding returns the runner name under which this process takes new jobs now, or "" when it takes
	// none (workers not started, draining, stopping): the jobs are queued instead.
	Holding() string
	// Hold runs the jobs that were committed with the runner name Holding returned; the jobs are the
	// caller's copies, which it no longer changes.
	Hold(runner string, jobs []*Job)
}

// Process is this replica's asynchronous side as readiness sees it (jobs.Service).
type Process interface {
	// Running reports whether the workers run.
	Running() bool
	// Draining reports whether the replica is stopping (SIGTERM): it finishes its requests and work.
	Draining() bool
}

// Deps are the asynchronous side's parts the core calls, given to NewApp. A nil part is left out: no
// work is queued, no event announced, any binding accepted (an App without workers: the models tests,
// offline tools); a use case that needs the missing Router or Follower answers 503.
type Deps struct {
	Queue    Enqueuer
	Events   Publisher
	Bindings BindingChecker
	Router   Router
	Follower Follower
	Process  Process
	Holder   Holder
	// Listener is the process's PostgreSQL listener, shared with the event broker (jobs.New): the identity
	// cache follows credential changes on it. Nil on PostgreSQL: the cache makes a listener of its own.
	Listener *pglisten.Listener
}

// enqueue puts work on the queue inside tx.
func (a *App) enqueue(tx *gorm.DB, work ...Work) error {
	if a.deps.Queue == nil || len(work) == 0 {
		return nil
	}
	return a.deps.Queue.Enqueue(tx, work...)
}

// holding returns the runner name under which this process takes submitted jobs now, or "".
func (a *App) holding() string {
	if a.deps.Holder == nil {
		return ""
	}
	return a.deps.Holder.Holding()
}

// notify announces that the row id of topic changed; call it after the change commits.
func (a *App) notify(ctx context.Context, topic Topic, id string) {
	if a.deps.Events != nil {
		a.deps.Events.Publish(ctx, topic, id)
	}
}

// checkBinding checks a tenant binding names a known family or channel.
func (a *App) checkBinding(model string) error {
	if a.deps.Bindings == nil {
		return nil
	}
	return a.deps.Bindings.CheckBinding(model)
}

// errNoRouter answers a use case that needs the asynchronous side on an App built without it.
var errNoRouter = &Error{Kind: KindUnavailable, Message: "generation is not available on this server process; retry later"}

func (a *App) router() (Router, error) {
	if a.deps.Router == nil {
		return nil, errNoRouter
	}
	return a.deps.Router, nil
}

func (a *App) follower() (Follower, error) {
	if a.deps.Follower == nil {
		return nil, errNoRouter
	}
	return a.deps.Follower, nil
}

// ChangedRow is the current row of a changed job (*Job) or video task (*VideoTask), for the event broker.
type ChangedRow struct {
	ID    string
	Value any
}

// ChangedRows reads the current rows of ids of topic, for the event broker (jobs/events), which delivers
// them to the subscribers that may see them.
func ChangedRows(ctx context.Context, db *DB, topic Topic, ids []string) ([]ChangedRow, error) {
	switch topic {
	case TopicJob:
		return loadChanged(db.WithContext(ctx), ids, func(j *Job) string { return j.ID })
	case TopicVideo:
		return loadChanged(db.WithContext(ctx), ids, func(t *VideoTask) string { return t.ID })
	}
	return nil, fmt.Errorf("unknown topic %q", topic)
}

func loadChanged[T any](db *gorm.DB, ids []string, idOf func(*T) string) ([]ChangedRow, error) {
	var found []T
	if err := db.Where("id IN ?", ids).Find(&found).Error; err != nil {
		return nil, err
	}
	out := make([]ChangedRow, len(found))
	for i := range found {
		out[i] = ChangedRow{ID: idOf(&found[i]), Value: &found[i]}
	}
	return out, nil
}

// ChangedSince lists the ids of the rows of topic updated since a time (at most 5000, newest first): what
// a broker that lost its notifications reads again.
func ChangedSince(ctx context.Context, db *DB, topic Topic, since time.Time) ([]string, error) {
	var model any
	switch topic {
	case TopicJob:
		model = &Job{}
	case TopicVideo:
		model = &VideoTask{}
	default:
		return nil, fmt.Errorf("unknown topic %q", topic)
	}
	var ids []string
	err := db.WithContext(ctx).Model(model).Where("updated_at >= ?", since).
		Order("updated_at DESC").Limit(5000).Pluck("id", &ids).Error
	return ids, err
}
