package models

import (
	"context"
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

// Deps are the asynchronous side's parts the core calls, given to NewApp. A nil part is left out: no
// work is queued, no event announced, any binding accepted (an App without workers: the models tests,
// offline tools).
type Deps struct {
	Queue    Enqueuer
	Events   Publisher
	Bindings BindingChecker
	// Listener is the process's PostgreSQL listener, shared with the event broker (jobs.New): the identity
	// cache follows credential changes on it. Nil on PostgreSQL: the cache makes a listener of its own.
	Listener *pglisten.Listener
}

// enqueue puts work on the queue inside tx.
func (a *App) enqueue(tx *gorm.DB, work ...Work) error {
	if a.deps.Queue == nil {
		return nil
	}
	return a.deps.Queue.Enqueue(tx, work...)
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
