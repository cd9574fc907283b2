// Package events carries the changes of image jobs and video tasks to their subscribers (GraphQL
// subscriptions, the console's live job list) on every replica: the Broker, and the followers that turn
// changed rows into streams of public states.
//
// The core announces a change after its transaction commits through its models.Publisher (the Broker,
// given to models.NewApp by jobs.New). The Broker publishes it to this process at once and, on
// PostgreSQL, to the other replicas with pg_notify on the channel Channel (payload "topic:id"), which
// every replica receives on its one listener (models/pglisten, shared with the identity cache). An event
// carries no state: the broker reloads the row from the database (once per event and process, however
// many follow it, many rows per query) and hands it to each follower, which turns it into the public
// view and queues it, in order, on a channel of its own. Follow* read the current state only after
// subscribing, so nothing that happens in between is lost, and drop states they already sent. No
// goroutine is kept per follower: the broker's delivery loop does the sending.
//
// The Broker needs the database alone, not the core (models.App): it is built before the App, which
// takes it as its publisher.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"studio/models"
	"studio/models/pglisten"
)

// Channel is the PostgreSQL notification channel of job and video events.
const Channel = "studio_events"

// Options tunes a Broker; zero values take the defaults.
type Options struct {
	// QueueLimit is how many unread states one stream keeps before it drops the oldest (default 16).
	QueueLimit int
	// Listener is the process's PostgreSQL listener (jobs.New shares it with the core's identity cache);
	// nil on PostgreSQL: the broker makes its own.
	Listener *pglisten.Listener
	// RetryMax bounds the back-off between attempts to reconnect the broker's own listener (default 5 s).
	RetryMax time.Duration
	// MaxPerIdentity bounds the subscriptions one identity holds open at once on this replica, whatever
	// the surface (GraphQL subscriptions, the console's event stream); the setting
	// SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY (default DefaultMaxPerIdentity).
	MaxPerIdentity int
}

// DefaultMaxPerIdentity is the default of Options.MaxPerIdentity, and of the setting
// SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY.
const DefaultMaxPerIdentity = 100

// eventKey names what a subscription follows: one row of a topic, or every row of it (ID "").
type eventKey struct {
	topic models.Topic
	id    string
}

// Broker delivers the changes of jobs and video tasks to subscriptions in this process, and on
// PostgreSQL exchanges them with the other replicas through LISTEN/NOTIFY.
type Broker struct {
	db   *models.DB
	opts Options

	mu      sync.Mutex
	subs    map[eventKey]map[*subscription]struct{}
	pending map[eventKey]struct{}
	wake    chan struct{}

	// PostgreSQL: notifications waiting to be sent, and the backend of the connection that sends them
	// (a replica's own notifications come back to its listener and are skipped by that backend id).
	notifyMu    sync.Mutex
	notifyQueue []string
	notifyWake  chan struct{}
	notifierPID atomic.Uint32

	// PostgreSQL: the listener, held while the broker runs (release), whether it listens on Channel, and
	// when it last stopped (lostAt: touched by the listener's hooks only).
	listener  *pglisten.Listener
	release   func()
	listening atomic.Bool
	lostAt    time.Time

	ctx     context.Context // the running broker's
	cancel  context.CancelFunc
	done    sync.WaitGroup
	started bool

	// held counts the open subscriptions of each identity (Identity.Owner) in this process, against
	// maxPerIdentity. The count is per replica and in memory: a count kept in the database would stay
	// taken by the subscriptions of a replica that crashed.
	heldMu         sync.Mutex
	held           map[string]int
	maxPerIdentity int
}

// New returns the broker of the database db; Start runs it. It is the models.Publisher of the core:
// give it to models.NewApp (jobs.New does).
func New(db *models.DB, opts Options) *Broker {
	if opts.QueueLimit <= 0 {
		opts.QueueLimit = 16
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Second
	}
	if opts.MaxPerIdentity <= 0 {
		opts.MaxPerIdentity = DefaultMaxPerIdentity
	}
	b := &Broker{db: db, opts: opts, held: map[string]int{}, maxPerIdentity: opts.MaxPerIdentity,
		subs: map[eventKey]map[*subscription]struct{}{}, pending: map[eventKey]struct{}{},
		wake: make(chan struct{}, 1), notifyWake: make(chan struct{}, 1)}
	if db.Dialect == models.Postgres {
		if b.listener = opts.Listener; b.listener == nil {
			b.listener = models.NewListener(db, pglisten.Options{RetryMax: opts.RetryMax})
		}
		b.listener.Handle(Channel, pglisten.Handler{Notify: b.received, Connected: b.connected, Lost: b.lost})
	}
	return b
}

// Start runs the delivery loop and, on PostgreSQL, the notifier connection, and holds the listener.
func (b *Broker) Start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.ctx, b.cancel, b.started = ctx, cancel, true
	b.run(func() { b.dispatch(ctx) })
	if b.listener != nil {
		b.run(func() { b.notify(ctx) })
		b.release = b.listener.Start()
	}
	return nil
}

func (b *Broker) run(f func()) {
	b.done.Add(1)
	go func() {
		defer b.done.Done()
		f()
	}()
}

// Stop sends the notifications still queued, stops the loops and waits for them, and gives the listener
// back (it stops when nothing else holds it).
func (b *Broker) Stop() {
	b.mu.Lock()
	cancel, release := b.cancel, b.release
	b.started, b.cancel, b.release = false, nil, nil
	b.mu.Unlock()
	if cancel != nil {
		cancel()
		b.done.Wait()
	}
	if release != nil {
		release()
	}
}

// Listening reports whether the PostgreSQL listener listens on Channel (always false on SQLite).
func (b *Broker) Listening() bool { return b.listening.Load() }

// Publish announces that the row id of topic changed: to this process at once and, on PostgreSQL, to
// every other replica. It never blocks on the database; it is the core's models.Publisher.
func (b *Broker) Publish(_ context.Context, topic models.Topic, id string) {
	b.enqueue(eventKey{topic, id})
	if b.db.Dialect == models.Postgres {
		b.notifyMu.Lock()
		if len(b.notifyQueue) < maxNotifyQueue {
			b.notifyQueue = append(b.notifyQueue, string(topic)+":"+id)
		}
		b.notifyMu.Unlock()
		signal(b.notifyWake)
	}
}

// maxNotifyQueue bounds the notifications waiting for the notifier (when it is not running, or the
// database does not answer); beyond it events reach the other replicas only through their re-reads.
const maxNotifyQueue = 100_000

// enqueue marks a row as changed for the delivery loop; repeated changes before it runs are one reload.
func (b *Broker) enqueue(keys ...eventKey) {
	b.mu.Lock()
	for _, k := range keys {
		b.pending[k] = struct{}{}
	}
	b.mu.Unlock()
	signal(b.wake)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// loadBatch is the most rows the delivery loop reloads with one query.
const loadBatch = 500

// dispatch is the delivery loop: it reloads the changed rows that someone follows and hands them out.
func (b *Broker) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		}
		for ctx.Err() == nil {
			topic, ids := b.takePending()
			if len(ids) == 0 {
				break
			}
			rows, err := b.load(ctx, topic, ids)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// Keep the changes and try again shortly: the database may be restarting.
				slog.Warn("events: reload changed rows; retrying", "topic", topic, "count", len(ids), "err", err)
				b.retryLater(ctx, topic, ids)
				continue
			}
			b.deliver(topic, rows)
		}
	}
}

// retryLater puts changes back into the pending set after a pause.
func (b *Broker) retryLater(ctx context.Context, topic models.Topic, ids []string) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(500 * time.Millisecond):
	}
	keys := make([]eventKey, len(ids))
	for i, id := range ids {
		keys[i] = eventKey{topic, id}
	}
	b.enqueue(keys...)
}

// takePending removes up to loadBatch changed rows of one topic from the pending set, keeping only those
// that a subscription follows (by id, or every row of the topic).
func (b *Broker) takePending() (models.Topic, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var topic models.Topic
	var ids []string
	for k := range b.pending {
		if topic != "" && k.topic != topic {
			continue
		}
		delete(b.pending, k)
		if len(b.subs[k]) == 0 && len(b.subs[eventKey{k.topic, ""}]) == 0 {
			continue
		}
		topic = k.topic
		ids = append(ids, k.id)
		if len(ids) == loadBatch {
			break
		}
	}
	return topic, ids
}

// load reads the current rows of ids through the core: *models.Job for jobs, *models.VideoTask for
// video tasks.
func (b *Broker) load(ctx context.Context, topic models.Topic, ids []string) ([]models.ChangedRow, error) {
	return models.ChangedRows(ctx, b.db, topic, ids)
}

// subscription is one follower of a row (or of every row of a topic) in this process. deliver runs on
// the delivery loop, under the broker's lock: it must not block, and it reports true when the follower
// is finished (the broker then forgets it).
type subscription struct {
	key     eventKey
	filter  func(any) bool
	deliver func(any) (finished bool)
	// release gives back the identity's place (hold); the broker calls it when it forgets the
	// subscription, and the follower when its context ends: the first call counts.
	release func()
}

// hold takes one of the identity's places for a new subscription, or refuses it when all are taken. The
// returned function gives the place back; calling it again does nothing.
func (b *Broker) hold(id *models.Identity) (func(), error) {
	owner := id.Owner()
	b.heldMu.Lock()
	defer b.heldMu.Unlock()
	if b.held[owner] >= b.maxPerIdentity {
		return nil, &models.Error{Kind: models.KindRateLimited, Message: fmt.Sprintf("this identity already has "+
			"%d subscriptions open (the limit, SERVICE_MAX_SUBSCRIPTIONS_PER_IDENTITY, is %d per replica); close "+
			"some (complete them, close their connection or page) before opening another", b.held[owner], b.maxPerIdentity)}
	}
	b.held[owner]++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.heldMu.Lock()
			if b.held[owner]--; b.held[owner] <= 0 {
				delete(b.held, owner)
			}
			b.heldMu.Unlock()
		})
	}, nil
}

// Held returns how many subscriptions the identity holds open in this process.
func (b *Broker) Held(id *models.Identity) int {
	b.heldMu.Lock()
	defer b.heldMu.Unlock()
	return b.held[id.Owner()]
}

func (b *Broker) subscribe(s *subscription) {
	b.mu.Lock()
	set := b.subs[s.key]
	if set == nil {
		set = map[*subscription]struct{}{}
		b.subs[s.key] = set
	}
	set[s] = struct{}{}
	b.mu.Unlock()
}

func (b *Broker) unsubscribe(s *subscription) {
	b.mu.Lock()
	b.forget(s)
	b.mu.Unlock()
}

// forget removes a subscription and gives its identity's place back; the caller holds b.mu.
func (b *Broker) forget(s *subscription) {
	if set := b.subs[s.key]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(b.subs, s.key)
		}
	}
	if s.release != nil {
		s.release()
	}
}

// deliver hands each row to the subscriptions that follow it and forgets those that finished.
func (b *Broker) deliver(topic models.Topic, rows []models.ChangedRow) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var finished []*subscription
	for _, r := range rows {
		for s := range b.subs[eventKey{topic, r.ID}] {
			if s.deliver(r.Value) {
				finished = append(finished, s)
			}
		}
		for s := range b.subs[eventKey{topic, ""}] {
			if (s.filter == nil || s.filter(r.Value)) && s.deliver(r.Value) {
				finished = append(finished, s)
			}
		}
	}
	for _, s := range finished {
		b.forget(s)
	}
}

// Subscribers returns how many subscriptions are open in this process.
func (b *Broker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, set := range b.subs {
		n += len(set)
	}
	return n
}

// stream is the outgoing side of one follower: a buffered channel that never blocks its sender. When the
// reader falls QueueLimit states behind, the oldest waiting state is dropped (a later one supersedes it).
type stream[T any] struct {
	out     chan *T
	dropped int
}

func newStream[T any](size int) *stream[T] { return &stream[T]{out: make(chan *T, size)} }

// send queues v, dropping the oldest waiting value when the channel is full. It is called by one
// sender at a time (the follower's lock).
func (s *stream[T]) send(v *T) {
	for {
		select {
		case s.out <- v:
			return
		default:
		}
		select {
		case <-s.out:
			s.dropped++
		default:
		}
	}
}

// follower turns the reloaded rows (R) of one job or video task into the stream of its public states (V).
type follower[R, V any] struct {
	mu      sync.Mutex
	stream  *stream[V]
	last    V
	ready   bool // the current state was sent; until then rows wait in pending
	pending []*R // rows reloaded while the current state was being read
	ended   bool
	view    func(*R) V
	newer   func(last, v *V) bool // v is a later, different state than last
	done    func(v *V) bool       // v is a final state
}

// push takes a reloaded row: held back until the current state is sent, then sent if it is a later,
// different state. It reports true once the stream ended (it is then closed) or nobody reads.
func (f *follower[R, V]) push(v any) bool {
	row := v.(*R)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return true
	}
	if !f.ready {
		if len(f.pending) == cap(f.stream.out) {
			f.pending = slices.Delete(f.pending, 0, 1)
		}
		f.pending = append(f.pending, row)
		return false
	}
	return f.offer(f.view(row))
}

// offer sends v unless it is not newer than the last state sent; the caller holds f.mu.
func (f *follower[R, V]) offer(v V) bool {
	if !f.newer(&f.last, &v) {
		return false
	}
	f.last = v
	f.send(v)
	return f.ended
}

// send sends v and closes the stream after a final state; the caller holds f.mu.
func (f *follower[R, V]) send(v V) {
	f.stream.send(&v)
	if f.done(&v) {
		f.ended = true
		close(f.stream.out)
	}
}

// follow streams one row's public states to an identity that may generate: it subscribes to key before reading the current state (so
// that no change in between is lost), sends that state first, then each later change; the stream is
// closed after a final state, and it stops when ctx ends. No goroutine is kept per stream: the delivery
// loop sends into the returned channel.
func follow[R, V any](ctx context.Context, b *Broker, id *models.Identity, key eventKey, f *follower[R, V], read func() (*R, error)) (<-chan *V, error) {
	if err := id.Require(models.CapGenerate); err != nil {
		return nil, err
	}
	release, err := b.hold(id)
	if err != nil {
		return nil, err
	}
	f.stream = newStream[V](b.opts.QueueLimit)
	sub := &subscription{key: key, deliver: f.push, release: release}
	b.subscribe(sub)
	row, err := read()
	if err != nil {
		b.unsubscribe(sub)
		return nil, err
	}
	f.mu.Lock()
	f.last = f.view(row)
	f.send(f.last)
	for _, p := range f.pending {
		if f.ended {
			break
		}
		f.offer(f.view(p))
	}
	f.ready, f.pending = true, nil
	ended := f.ended
	f.mu.Unlock()
	if ended {
		b.unsubscribe(sub)
		return f.stream.out, nil
	}
	context.AfterFunc(ctx, func() {
		b.unsubscribe(sub)
		f.mu.Lock()
		f.ended = true
		f.mu.Unlock()
	})
	return f.stream.out, nil
}

// FollowJob streams the public state of a job the identity may see: first its current state, then each
// change in order (states already sent are skipped); the stream is closed after the job ends. It stops
// when ctx ends. A job the identity may not see is KindNotFound, as for GET /api/jobs?id=.
func (b *Broker) FollowJob(ctx context.Context, id *models.Identity, jobID string) (<-chan *models.JobView, error) {
	f := &follower[models.Job, models.JobView]{view: (*models.Job).View, newer: newerJob,
		done: func(v *models.JobView) bool { return v.Status.Ended() }}
	return follow(ctx, b, id, eventKey{models.TopicJob, jobID}, f, func() (*models.Job, error) {
		return models.ReadJobFor(ctx, b.db, id, jobID)
	})
}

// FollowVideo streams the public state of a video task the identity may see, as FollowJob does for an
// image job: its current state first, then each change; the stream is closed after the task ends (done,
// failed or cancelled). A task the identity may not see is KindNotFound, as for GET /api/videos?id=.
func (b *Broker) FollowVideo(ctx context.Context, id *models.Identity, taskID string) (<-chan *models.VideoTaskView, error) {
	f := &follower[models.VideoTask, models.VideoTaskView]{view: (*models.VideoTask).View, newer: newerVideo,
		done: func(v *models.VideoTaskView) bool { return v.Status.Ended() }}
	return follow(ctx, b, id, eventKey{models.TopicVideo, taskID}, f, func() (*models.VideoTask, error) {
		return models.ReadVideoTaskFor(ctx, b.db, id, taskID)
	})
}

// jobsFollower turns the reloaded rows of every job an identity may see into a stream of states.
type jobsFollower struct {
	mu     sync.Mutex
	stream *stream[models.JobView]
	sent   *lastSeen[models.JobView]
	ended  bool
}

func (f *jobsFollower) push(v any) bool {
	jv := v.(*models.Job).View()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return true
	}
	if last, ok := f.sent.get(jv.JobID); ok && !newerJob(&last, &jv) {
		return false
	}
	f.sent.put(jv.JobID, jv)
	f.stream.send(&jv)
	return false
}

// FollowJobs streams every change of the image jobs the identity may see (a tenant key: its tenant's
// jobs; a member key or a personal login: its own), until ctx ends.
func (b *Broker) FollowJobs(ctx context.Context, id *models.Identity) (<-chan *models.JobView, error) {
	if err := id.Require(models.CapGenerate); err != nil {
		return nil, err
	}
	release, err := b.hold(id)
	if err != nil {
		return nil, err
	}
	f := &jobsFollower{stream: newStream[models.JobView](b.opts.QueueLimit), sent: newLastSeen[models.JobView]()}
	sub := &subscription{key: eventKey{models.TopicJob, ""}, deliver: f.push, release: release,
		filter: func(v any) bool { return v.(*models.Job).VisibleTo(id) }}
	b.subscribe(sub)
	context.AfterFunc(ctx, func() {
		b.unsubscribe(sub)
		f.mu.Lock()
		f.ended = true
		f.mu.Unlock()
	})
	return f.stream.out, nil
}

// newerVideo reports whether v is a later, different state than last.
func newerVideo(last, v *models.VideoTaskView) bool {
	if v.UpdatedAt.Before(last.UpdatedAt) || last.Status.Ended() {
		return false
	}
	return v.Status != last.Status || v.Progress != last.Progress || v.VideoURL != last.VideoURL ||
		!equalStrPtr(v.Error, last.Error) || v.UpdatedAt.After(last.UpdatedAt)
}

// newerJob reports whether v is a later, different state than last (an older reload is dropped).
func newerJob(last, v *models.JobView) bool {
	if v.UpdatedAt.Before(last.UpdatedAt) || last.Status.Ended() {
		return false
	}
	return v.Status != last.Status || v.Progress != last.Progress || v.CDNURL != last.CDNURL ||
		v.TemplateID != last.TemplateID || !equalStrPtr(v.Error, last.Error) || !slices.Equal(v.Steps, last.Steps) ||
		v.UpdatedAt.After(last.UpdatedAt)
}

func equalStrPtr(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// lastSeen remembers the last state sent per id, for a bounded number of ids.
type lastSeen[T any] struct{ m map[string]T }

func newLastSeen[T any]() *lastSeen[T] { return &lastSeen[T]{m: map[string]T{}} }

func (l *lastSeen[T]) get(id string) (T, bool) { v, ok := l.m[id]; return v, ok }

func (l *lastSeen[T]) put(id string, v T) {
	if len(l.m) >= 4096 {
		clear(l.m) // forgetting only risks sending one state twice
	}
	l.m[id] = v
}

// notify is the PostgreSQL notifier: it sends queued events with pg_notify, many in one round trip, over
// one dedicated connection whose backend id the listener recognises as this replica's own.
func (b *Broker) notify(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	for {
		stopping := false
		select {
		case <-ctx.Done():
			stopping = true
		case <-b.notifyWake:
		}
		b.notifyMu.Lock()
		payloads := b.notifyQueue
		b.notifyQueue = nil
		b.notifyMu.Unlock()
		if len(payloads) > 0 {
			slices.Sort(payloads)
			payloads = slices.Compact(payloads)
			sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			conn = b.sendNotifications(sendCtx, conn, payloads)
			cancel()
		}
		if stopping {
			return
		}
	}
}

// sendNotifications sends payloads, reconnecting once when the connection was lost; it returns the
// connection to use next (nil when none could be made). Events that cannot be sent are logged and
// dropped: the subscribers of other replicas re-read their rows when their listener reconnects.
func (b *Broker) sendNotifications(ctx context.Context, conn *pgx.Conn, payloads []string) *pgx.Conn {
	for attempt := 0; attempt < 2; attempt++ {
		if conn == nil {
			var err error
			if conn, err = b.connect(ctx, "studio-events-notify"); err != nil {
				slog.Warn("events: notifier cannot connect", "err", err, "dropped", len(payloads))
				return nil
			}
			b.notifierPID.Store(conn.PgConn().PID())
		}
		_, err := conn.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", Channel, payloads)
		if err == nil {
			return conn
		}
		_ = conn.Close(context.Background())
		conn = nil
		if attempt == 1 {
			slog.Warn("events: pg_notify failed", "err", err, "dropped", len(payloads))
		}
	}
	return nil
}

// connect opens a dedicated PostgreSQL connection (outside GORM's pool) named for pg_stat_activity.
func (b *Broker) connect(ctx context.Context, name string) (*pgx.Conn, error) {
	cfg, _, err := models.PostgresConfig(b.db.URL)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = name
	return pgx.ConnectConfig(ctx, cfg)
}

// ListenerName is the application_name of the listener's connection in pg_stat_activity: the process's
// one listener (models/pglisten), which carries the events and the identity cache's notices.
const ListenerName = pglisten.ApplicationName

// received turns a notification of another replica into a local event (the listener's Notify).
func (b *Broker) received(n *pgconn.Notification) {
	if n.PID == b.notifierPID.Load() {
		return // this replica's own event, already delivered here
	}
	topic, id, ok := strings.Cut(n.Payload, ":")
	if !ok || id == "" {
		return
	}
	b.mu.Lock()
	if !b.started { // the listener outlives a stopped broker while the identity cache holds it
		b.mu.Unlock()
		return
	}
	b.pending[eventKey{models.Topic(topic), id}] = struct{}{}
	b.mu.Unlock()
	signal(b.wake)
}

// connected runs when the listener listens on Channel again (the listener's Connected): events sent
// while it was away were not received, so what is followed here is re-read (resync, on a goroutine of
// the broker's, so that the listener goes on meanwhile).
func (b *Broker) connected(context.Context) {
	b.listening.Store(true)
	lostAt := b.lostAt
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		ctx := b.ctx
		b.run(func() { b.resync(ctx, lostAt) })
	}
}

// lost runs when the listener's connection is lost or closed (the listener's Lost).
func (b *Broker) lost() {
	b.listening.Store(false)
	b.lostAt = time.Now()
}

// resync re-reads, after the listener (re)connected, every row followed here by id, and the rows of a
// topic followed as a whole that changed since the connection was lost.
func (b *Broker) resync(ctx context.Context, lostAt time.Time) {
	b.mu.Lock()
	var keys []eventKey
	var topics []models.Topic
	for k := range b.subs {
		if k.id != "" {
			keys = append(keys, k)
		} else {
			topics = append(topics, k.topic)
		}
	}
	b.mu.Unlock()
	if !lostAt.IsZero() {
		since := lostAt.Add(-2 * time.Second)
		for _, topic := range topics {
			ids, err := b.changedSince(ctx, topic, since)
			if err != nil {
				slog.Warn("events: re-read after reconnect", "topic", topic, "err", err)
			}
			for _, id := range ids {
				keys = append(keys, eventKey{topic, id})
			}
		}
	}
	if len(keys) > 0 {
		b.enqueue(keys...)
	}
}

// changedSince lists the rows of a topic updated since a time (the core's models.ChangedSince).
func (b *Broker) changedSince(ctx context.Context, topic models.Topic, since time.Time) ([]string, error) {
	return models.ChangedSince(ctx, b.db, topic, since)
}
