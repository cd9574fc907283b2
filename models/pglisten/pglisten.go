// Package pglisten is the one PostgreSQL listener of a process, built on pgxlisten: one connection
// LISTENs on every channel its users registered, hands each notification to the handlers of its channel,
// and connects again, with back-off, when the connection is lost.
//
// PostgreSQL keeps nothing for a session that is not listening: what is sent while the connection is
// down is lost. Each handler therefore says what it does once LISTEN is in effect again
// (Handler.Connected, which runs on the first connection too) and when the connection is lost
// (Handler.Lost): the identity cache empties itself and stops serving until then, the event broker
// re-reads what it follows.
//
// The package imports nothing of the core (like models/media): whoever builds the users builds the
// listener and hands it to each (jobs.New gives one to the core and to the event broker).
package pglisten

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// ApplicationName names the listener's connection in pg_stat_activity (Connect sets it).
const ApplicationName = "studio-listen"

// Handler is one user's part of a channel. Its functions run on the listener's goroutine, one at a
// time and in order; they must return quickly (a slow one delays every channel), and must not call
// Start's release function. Any of them may be nil.
type Handler struct {
	// Notify receives each notification of the channel (n.PID is the sender's backend).
	Notify func(n *pgconn.Notification)
	// Connected runs once LISTEN on the channel is in effect on a new connection, the first one
	// included, before any notification of that connection is handed to Notify: whatever was sent while
	// no connection listened was lost. ctx ends when the connection is given up.
	Connected func(ctx context.Context)
	// Lost runs when a connection on which Connected ran is lost or closed (Stop included).
	Lost func()
}

// Options tunes a Listener; zero values take the defaults.
type Options struct {
	// RetryMin and RetryMax bound the back-off between failed attempts to connect and listen (defaults
	// 100 ms and 5 s). A connection lost after it listened is made again at once.
	RetryMin, RetryMax time.Duration
	// Logger receives lost connections and failed attempts (default slog.Default()).
	Logger *slog.Logger
}

// Listener is the process's PostgreSQL listener. Register the handlers (Handle) before Start; a handler
// registered while the listener runs makes it connect again, so that every handler sees Connected.
type Listener struct {
	connect func(ctx context.Context) (*pgx.Conn, error)
	opts    Options

	mu       sync.Mutex
	handlers map[string][]*entry // by channel
	refs     int                 // holders (Start)
	stop     context.CancelFunc  // ends the running loop
	done     chan struct{}       // closed when the running loop ended
	last     chan struct{}       // the done of the loop before (a loop waits for the one before it)
	session  context.CancelFunc  // ends the current pgxlisten session (a handler was added)
	changed  chan struct{}       // a handler was added

	listening atomic.Bool
	pid       atomic.Uint32
	ready     chan struct{}
	readyOnce sync.Once

	// The current connection, touched by the listener's goroutine only.
	failures int             // attempts in a row that did not listen on every channel
	channels int             // channels of the current session
	listened map[string]bool // channels whose LISTEN is in effect on the current connection
}

type entry struct{ h Handler }

// New returns a listener that opens its connections with connect (Connect makes one from a
// configuration). Nothing connects before Start.
func New(connect func(ctx context.Context) (*pgx.Conn, error), opts Options) *Listener {
	if opts.RetryMin <= 0 {
		opts.RetryMin = 100 * time.Millisecond
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Second
	}
	opts.RetryMax = max(opts.RetryMax, opts.RetryMin)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Listener{connect: connect, opts: opts, handlers: map[string][]*entry{},
		changed: make(chan struct{}, 1), ready: make(chan struct{})}
}

// Connect returns a connect function for New: each call opens a connection of cfg (not changed) named
// ApplicationName, within 10 s.
func Connect(cfg *pgx.ConnConfig) func(ctx context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		c := cfg.Copy()
		c.RuntimeParams["application_name"] = ApplicationName
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return pgx.ConnectConfig(cctx, c)
	}
}

// ConnectDSN is Connect for a connection string (pgx.ParseConfig's forms); an unparsable one fails
// every attempt.
func ConnectDSN(dsn string) func(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return func(context.Context) (*pgx.Conn, error) { return nil, err }
	}
	return Connect(cfg)
}

// Handle registers h for the notifications of channel and returns the function that removes it. While
// the listener runs, it connects again to take the new handler in (Connected then runs for every
// handler, Lost first for those that were connected).
func (l *Listener) Handle(channel string, h Handler) (remove func()) {
	e := &entry{h}
	l.mu.Lock()
	l.handlers[channel] = append(l.handlers[channel], e)
	if l.session != nil {
		l.session()
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.handlers[channel] = slices.DeleteFunc(l.handlers[channel], func(x *entry) bool { return x == e })
	}
}

// Start makes the listener run until every holder released it: the first Start connects, the last
// release closes the connection (Lost runs) and returns once it is closed. Each release function
// counts once.
func (l *Listener) Start() (release func()) {
	l.mu.Lock()
	l.refs++
	if l.refs == 1 {
		ctx, stop := context.WithCancel(context.Background())
		l.stop, l.done = stop, make(chan struct{})
		go l.run(ctx, l.last, l.done)
		l.last = l.done
	}
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(l.release) }
}

func (l *Listener) release() {
	l.mu.Lock()
	l.refs--
	if l.refs > 0 {
		l.mu.Unlock()
		return
	}
	stop, done := l.stop, l.done
	l.stop, l.done = nil, nil
	l.mu.Unlock()
	stop()
	<-done
}

// Listening reports whether the listener's connection listens on every registered channel now.
func (l *Listener) Listening() bool { return l.listening.Load() }

// Ready is closed once the listener first listened on every channel registered then.
func (l *Listener) Ready() <-chan struct{} { return l.ready }

// PID is the backend process id of the listening connection (0 when there is none).
func (l *Listener) PID() uint32 {
	if !l.listening.Load() {
		return 0
	}
	return l.pid.Load()
}

// run is the listener's goroutine: one pgxlisten session per set of channels, until ctx ends.
func (l *Listener) run(ctx context.Context, last, done chan struct{}) {
	defer close(done)
	if last != nil {
		<-last // a release still closing the connection before
	}
	for ctx.Err() == nil {
		l.mu.Lock()
		var channels []string
		for ch, hs := range l.handlers {
			if len(hs) > 0 {
				channels = append(channels, ch)
			}
		}
		sctx, endSession := context.WithCancel(ctx)
		l.session = endSession
		l.mu.Unlock()
		if len(channels) == 0 {
			select {
			case <-ctx.Done():
			case <-l.changed:
			}
			endSession()
			continue
		}
		slices.Sort(channels)
		pl := &pgxlisten.Listener{Connect: l.connectOnce, LogError: l.attemptEnded, ReconnectDelay: -1}
		for _, ch := range channels {
			pl.Handle(ch, channelHandler{l: l})
		}
		l.channels = len(channels)
		_ = pl.Listen(sctx) // returns once sctx ends: Stop, or a handler was added
		endSession()
		select {
		case <-l.changed: // taken in by the session just ended or by the next one
		default:
		}
	}
	l.mu.Lock()
	l.session = nil
	l.mu.Unlock()
}

// connectOnce is pgxlisten's Connect: it waits out the back-off after a failed attempt, then connects.
func (l *Listener) connectOnce(ctx context.Context) (*pgx.Conn, error) {
	if l.failures > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(l.backoff()):
		}
	}
	l.listened = map[string]bool{}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	l.pid.Store(conn.PgConn().PID())
	return conn, nil
}

// backoff is the pause before the next attempt after l.failures failed ones.
func (l *Listener) backoff() time.Duration {
	d := l.opts.RetryMin
	for i := 1; i < l.failures && d < l.opts.RetryMax; i++ {
		d *= 2
	}
	return min(d, l.opts.RetryMax)
}

// attemptEnded is pgxlisten's LogError. The handlers never fail, so it is called only when an attempt
// ends: it could not connect or listen, its connection was lost, or the session ended.
func (l *Listener) attemptEnded(ctx context.Context, err error) {
	wasListening := l.listening.Swap(false)
	for _, ch := range sortedKeys(l.listened) {
		for _, e := range l.entries(ch) {
			if e.h.Lost != nil {
				e.h.Lost()
			}
		}
	}
	l.listened = nil
	if ctx.Err() != nil {
		return // stopped, or connecting again to take in a new handler
	}
	if wasListening {
		l.opts.Logger.Warn("pglisten: connection lost; listening again", "err", err)
		return
	}
	l.failures++
	l.opts.Logger.Warn("pglisten: cannot listen; retrying", "attempt", l.failures, "in", l.backoff(), "err", err)
}

// entries returns the handlers of a channel now.
func (l *Listener) entries(channel string) []*entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.handlers[channel])
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// channelHandler hands pgxlisten's calls for a channel to its handlers.
type channelHandler struct{ l *Listener }

// HandleBacklog runs right after LISTEN on the channel took effect on a new connection.
func (c channelHandler) HandleBacklog(ctx context.Context, channel string, _ *pgx.Conn) error {
	l := c.l
	l.listened[channel] = true
	for _, e := range l.entries(channel) {
		if e.h.Connected != nil {
			e.h.Connected(ctx)
		}
	}
	if len(l.listened) == l.channels {
		l.failures = 0
		l.listening.Store(true)
		l.readyOnce.Do(func() { close(l.ready) })
	}
	return nil
}

// HandleNotification hands a notification to the channel's handlers.
func (c channelHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	for _, e := range c.l.entries(n.Channel) {
		if e.h.Notify != nil {
			e.h.Notify(n)
		}
	}
	return nil
}
