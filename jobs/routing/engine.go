package routing

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"studio/jobs/upstream"
)

// ErrNoUpstream means no upstream can serve the request; REST answers 400 当前无可用上游.
var ErrNoUpstream = errors.New("当前无可用上游")

// ErrUnknownModel means the request names a model or provider that does not exist; REST answers 400.
var ErrUnknownModel = errors.New("unknown model")

// ErrUnknownUpstream means an administrative action names no configured upstream.
var ErrUnknownUpstream = errors.New("unknown upstream")

// SwitchNote is the progress note format used on each switch to a backup channel.
const SwitchNote = "upstream failed, switching to backup channel (%d/2)"

// Request describes what a call needs from an upstream.
type Request struct {
	Media    upstream.Media
	Model    string // "", "auto", a family, a channel name, or for video a tier code
	Provider string // diagnosis bypass: only this provider, no scoring, no fallback
	Binding  string // tenant binding: family or channel name; "" for none; ignored when it names nothing of Media
	Needs    []upstream.Capability
	// Video only.
	Tier       string // tier code; "" lets routing choose one that fits
	Duration   int    // seconds; 0 for any
	Resolution string // 480p, 720p, 1080p, 768P, 2K; "" for any
}

// Route is the outcome of planning: the chain of upstreams to try and, for video, the tier to use.
type Route struct {
	Chain []*upstream.Upstream
	Tier  string
}

// Options tunes an engine; zero values take the defaults.
type Options struct {
	Store           HealthStore   // default: a new in-memory store
	RefreshInterval time.Duration // how often scores reload from the store; default 2 s
	FullRefresh     time.Duration // how often the whole window reloads; default 5 min
	RetryBase       time.Duration // first back-off before a retry, jittered; default 500 ms
	MaxRetries      int           // retries of the same upstream for transient errors; default 2
	Seed            uint64        // non-zero: deterministic random choices (tests)
	WriteInterval   time.Duration // least time between two writes of attempts to the store; default 250 ms
	Logger          *slog.Logger  // default: slog.Default()
}

// Engine routes requests over the upstreams of a registry.
type Engine struct {
	reg   *upstream.Registry
	store HealthStore
	opts  Options
	log   *slog.Logger

	rndMu sync.Mutex
	rnd   *rand.Rand // nil: the lock-free global generator

	mu      sync.RWMutex
	entries map[string]*entry

	refreshing  atomic.Bool
	lastRefresh atomic.Int64 // unix nano
	refreshMu   sync.Mutex
	lastFull    time.Time
	lastSince   time.Time

	origin string // marks the attempts this engine records, so that refreshes do not read them back

	wmu     sync.Mutex
	pending []pendingAttempt
	writing bool
	wake    chan struct{} // cuts the wait between two writes short (Flush)

	slots slots // the calls in flight to upstreams with max_concurrency (slots.go)
}

// pendingAttempt is an attempt waiting to be written, with the caller's context values (not its
// cancellation) so that a store can read request-scoped values such as a job id.
type pendingAttempt struct {
	ctx context.Context
	a   Attempt
}

// entry is the cached health of one upstream.
type entry struct {
	mu       sync.Mutex
	attempts []Attempt // within the window, oldest first; alike calls grouped (see group)
	stats    atomic.Pointer[Stats]
	state    atomic.Pointer[State]

	// Calls recorded here join the record of an alike call of the same minute (same outcome, class and
	// latency) instead of adding one, so that memory grows with the variety of outcomes and latencies,
	// not with the call rate. A group only gathers calls of the current run of successes or failures:
	// the order of successes and failures, which recent failures depend on, is kept exactly.
	group       map[groupKey]int // index in attempts of the open group of each kind of call
	groupMinute int64
	groupOK     bool
}

// groupKey is what alike calls share besides their outcome.
type groupKey struct {
	class   string
	latency int64
}

// add records one call made by this engine, joining an open group of alike calls when there is one.
func (en *entry) add(a Attempt) {
	minute := a.At.Unix() / 60
	if en.group == nil || minute != en.groupMinute || a.OK != en.groupOK {
		en.group = map[groupKey]int{}
		en.groupMinute, en.groupOK = minute, a.OK
	}
	k := groupKey{a.Class, a.LatencyMS}
	if i, ok := en.group[k]; ok {
		en.attempts[i].Count = en.attempts[i].N() + a.N()
		return
	}
	en.group[k] = len(en.attempts)
	en.attempts = append(en.attempts, a)
}

var noStats = &Stats{}

// NewEngine returns an engine over reg and loads the recorded health once.
func NewEngine(reg *upstream.Registry, opts Options) *Engine {
	if opts.Store == nil {
		opts.Store = NewMemoryHealthStore()
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = 2 * time.Second
	}
	if opts.FullRefresh <= 0 {
		opts.FullRefresh = 5 * time.Minute
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = 500 * time.Millisecond
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 2
	}
	if opts.WriteInterval <= 0 {
		opts.WriteInterval = 250 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var id [8]byte
	_, _ = crand.Read(id[:])
	e := &Engine{reg: reg, store: opts.Store, opts: opts, log: opts.Logger, entries: map[string]*entry{},
		origin: hex.EncodeToString(id[:]), wake: make(chan struct{}, 1)}
	if opts.Seed != 0 {
		e.rnd = rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Refresh(ctx); err != nil {
		e.log.Warn("routing: unable to load upstream health", "err", err)
	}
	return e
}

// Registry returns the registry the engine routes over.
func (e *Engine) Registry() *upstream.Registry { return e.reg }

// float returns a random number in [0, 1).
func (e *Engine) float() float64 {
	if e.rnd == nil {
		return rand.Float64()
	}
	e.rndMu.Lock()
	f := e.rnd.Float64()
	e.rndMu.Unlock()
	return f
}

// lookup returns the cached entry of an upstream, or nil.
func (e *Engine) lookup(name string) *entry {
	e.mu.RLock()
	en := e.entries[name]
	e.mu.RUnlock()
	return en
}

// entryOf returns the cached entry of an upstream, creating it.
func (e *Engine) entryOf(name string) *entry {
	if en := e.lookup(name); en != nil {
		return en
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	en := e.entries[name]
	if en == nil {
		en = &entry{}
		en.stats.Store(noStats)
		e.entries[name] = en
	}
	return en
}

// tierInfo is the duration range and resolutions of a video tier (spec section 4.5).
type tierInfo struct {
	min, max    int
	resolutions []string
}

var tierTable = map[string]tierInfo{
	upstream.TierA20Pro:  {4, 15, []string{"480p"}},
	upstream.TierA20Fast: {4, 15, []string{"480p", "720p"}},
	upstream.TierA20Mini: {4, 15, []string{"480p", "720p"}},
	upstream.TierA25Pro:  {4, 30, []string{"720p", "1080p"}},
	upstream.TierBH3:     {4, 15, []string{"768P", "2K"}},
}

// tierFits reports whether a tier takes the duration and resolution (zero values fit anything).
func tierFits(tier string, duration int, resolution string) bool {
	t, ok := tierTable[tier]
	if !ok {
		return false
	}
	if duration != 0 && (duration < t.min || duration > t.max) {
		return false
	}
	if resolution == "" {
		return true
	}
	for _, r := range t.resolutions {
		if strings.EqualFold(r, resolution) {
			return true
		}
	}
	return false
}

// firstTier returns the first tier of u, in the order of the tier table, that fits the request.
func firstTier(u *upstream.Upstream, duration int, resolution string) string {
	for _, t := range upstream.TierCodes {
		if u.Serves(t) && tierFits(t, duration, resolution) {
			return t
		}
	}
	return ""
}

// candidate is an upstream that passed every filter, with its selection weight.
type candidate struct {
	u *upstream.Upstream
	s *Stats
	w float64
}

// maxStack is how many candidates fit the stack buffer of one decision.
const maxStack = 64

// Plan returns the upstreams to try in order: the primary and at most two backups.
func (e *Engine) Plan(req Request) ([]*upstream.Upstream, error) {
	r, err := e.Route(req)
	return r.Chain, err
}

// Route plans a request: it filters by capability, state and binding, scores the candidates and draws
// the chain; it returns ErrNoUpstream when nothing fits and ErrUnknownModel for an unknown name.
func (e *Engine) Route(req Request) (Route, error) {
	e.maybeRefresh()
	set := e.reg.Current()
	t, err := resolveTarget(set, req)
	if err != nil {
		return Route{}, err
	}
	var buf [maxStack]candidate
	cands, passed := e.candidates(set, req, &t, buf[:0])
	if len(cands) == 0 {
		return Route{}, passed.err()
	}
	if t.provider != "" {
		// Diagnosis: uniform choice, no scoring, no fallback.
		return e.finish(req, t.tier, []*upstream.Upstream{e.pickUniform(cands)})
	}
	weigh(cands)
	e.preferFreeSlots(cands)
	primary := e.draw(cands)
	chain := make([]*upstream.Upstream, 1, 3)
	chain[0] = cands[primary].u
	if t.channel != "" {
		return e.finish(req, t.tier, chain)
	}
	tier := t.tier
	if req.Media == upstream.MediaVideo && tier == "" {
		tier = firstTier(chain[0], req.Duration, req.Resolution)
	}
	var backupBuf [maxStack]candidate
	backups := backupsOf(backupBuf[:0], cands, primary, req, tier)
	return e.finish(req, tier, e.drawBackups(chain, backups))
}

// target is what a request names, resolved against the current upstreams: the filters of Route.
type target struct {
	channel, family         string // the model: one channel, or one family; both "" for any
	tier                    string // video tier; "" lets routing choose one that fits
	provider                string // diagnosis bypass; "" for none
	bindChannel, bindFamily string // the tenant binding, when it names something of the request's media
	need                    uint32 // capability mask the upstream must cover
}

// resolveTarget resolves the model, tier, provider and binding of req against set; an unknown model,
// tier or provider is ErrUnknownModel.
func resolveTarget(set *upstream.Set, req Request) (target, error) {
	model, tier, err := requestedModel(req)
	if err != nil {
		return target{}, err
	}
	t := target{tier: tier}
	if t.channel, t.family, err = resolveModel(set, req.Media, model); err != nil {
		return target{}, err
	}
	if t.provider, err = resolveProvider(set, req); err != nil {
		return target{}, err
	}
	if req.Binding != "" {
		// A binding that names nothing of this media does not apply to it.
		t.bindChannel, t.bindFamily, _ = channelOrFamily(set, req.Media, req.Binding)
	}
	t.need = upstream.CapabilityMask(req.Needs)
	return t, nil
}

// requestedModel reads the model and tier req names: "auto" (and the default chat model) names none,
// and for video a tier code given as the model is the tier. An unknown tier is ErrUnknownModel.
func requestedModel(req Request) (model, tier string, err error) {
	model = req.Model
	if strings.EqualFold(model, "auto") || model == upstream.DefaultChatModel {
		model = ""
	}
	tier = req.Tier
	if strings.EqualFold(tier, "auto") {
		tier = ""
	}
	if req.Media == upstream.MediaVideo && upstream.KnownTier(model) {
		tier, model = model, ""
	}
	if tier != "" && !upstream.KnownTier(tier) {
		return "", "", fmt.Errorf("%w: unknown tier %q", ErrUnknownModel, tier)
	}
	return model, tier, nil
}

// resolveModel tells whether a model names one channel or a family of media ("" names neither); any
// other name is ErrUnknownModel.
func resolveModel(set *upstream.Set, media upstream.Media, model string) (channel, family string, err error) {
	if model == "" {
		return "", "", nil
	}
	channel, family, ok := channelOrFamily(set, media, model)
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrUnknownModel, model)
	}
	return channel, family, nil
}

// channelOrFamily tells whether name is a channel of media (channel == name) or a family of media
// (family == name); ok is false when it is neither.
func channelOrFamily(set *upstream.Set, media upstream.Media, name string) (channel, family string, ok bool) {
	if u := set.ByName(name); u != nil && u.Media == media {
		return name, "", true
	}
	if set.HasFamily(media, name) {
		return "", name, true
	}
	return "", "", false
}

// resolveProvider returns the diagnosis provider of req ("" for none or "auto"); a provider without an
// upstream of the request's media is ErrUnknownModel.
func resolveProvider(set *upstream.Set, req Request) (string, error) {
	provider := req.Provider
	if strings.EqualFold(provider, "auto") {
		provider = ""
	}
	if provider != "" && !set.HasProvider(req.Media, provider) {
		return "", fmt.Errorf("%w: unknown provider", ErrUnknownModel)
	}
	return provider, nil
}

// filterCounts counts the upstreams that passed each filter of candidates, to tell why none is left.
type filterCounts struct {
	model    int // of the media and the model requested
	options  int // and supporting the requested options
	rotation int // and in rotation
}

// err is the ErrNoUpstream of an empty candidate list, naming the first filter that left nothing.
func (n filterCounts) err() error {
	switch {
	case n.model == 0:
		return fmt.Errorf("%w: no upstream serves this model", ErrNoUpstream)
	case n.options == 0:
		return fmt.Errorf("%w: no upstream supports the requested options", ErrNoUpstream)
	case n.rotation == 0:
		return fmt.Errorf("%w: every suitable upstream is out of rotation", ErrNoUpstream)
	default:
		return fmt.Errorf("%w: no suitable upstream within the binding", ErrNoUpstream)
	}
}

// candidates appends to cands the upstreams of set that pass every filter of t (model, options,
// rotation, binding and provider, in that order) with their health, and counts what passed each filter.
func (e *Engine) candidates(set *upstream.Set, req Request, t *target, cands []candidate) ([]candidate, filterCounts) {
	var n filterCounts
	for _, u := range set.All {
		if !t.servesModel(u, req.Media) {
			continue
		}
		n.model++
		if !t.supports(u, req) {
			continue
		}
		n.options++
		s, ok := e.health(u)
		if !ok {
			continue
		}
		n.rotation++
		if !t.admits(u) {
			continue
		}
		cands = append(cands, candidate{u: u, s: s})
	}
	return cands, n
}

// servesModel reports whether u is of media and within the channel or family requested, if any.
func (t *target) servesModel(u *upstream.Upstream, media upstream.Media) bool {
	return u.Media == media && (t.channel == "" || u.Name == t.channel) && (t.family == "" || u.Family == t.family)
}

// supports reports whether u has every capability needed and, for video, a tier that takes the
// duration and resolution: the requested tier, or any tier of u when none is requested.
func (t *target) supports(u *upstream.Upstream, req Request) bool {
	if u.CapMask()&t.need != t.need {
		return false
	}
	if req.Media != upstream.MediaVideo {
		return true
	}
	if t.tier != "" {
		return u.Serves(t.tier) && tierFits(t.tier, req.Duration, req.Resolution)
	}
	return firstTier(u, req.Duration, req.Resolution) != ""
}

// health returns the recorded statistics of u, and false when u is out of rotation (disabled or removed).
func (e *Engine) health(u *upstream.Upstream) (*Stats, bool) {
	en := e.lookup(u.Name)
	if en == nil {
		return noStats, true
	}
	if st := en.state.Load(); st != nil && (st.Disabled || st.Removed) {
		return nil, false
	}
	return en.stats.Load(), true
}

// admits reports whether u is within the tenant binding and the diagnosis provider, if any.
func (t *target) admits(u *upstream.Upstream) bool {
	return (t.bindChannel == "" || u.Name == t.bindChannel) && (t.bindFamily == "" || u.Family == t.bindFamily) &&
		(t.provider == "" || u.Provider == t.provider)
}

// pickUniform chooses one candidate uniformly at random (diagnosis).
func (e *Engine) pickUniform(cands []candidate) *upstream.Upstream {
	return cands[int(e.float()*float64(len(cands)))%len(cands)].u
}

// backupsOf appends to backups the candidates other than the primary that can stand in for it: the
// same family for images, the same tier for video.
func backupsOf(backups, cands []candidate, primary int, req Request, tier string) []candidate {
	p := cands[primary].u
	for i, c := range cands {
		if i == primary {
			continue
		}
		switch req.Media {
		case upstream.MediaImage:
			if c.u.Family != p.Family {
				continue
			}
		case upstream.MediaVideo:
			if !c.u.Serves(tier) || !tierFits(tier, req.Duration, req.Resolution) {
				continue
			}
		}
		backups = append(backups, c)
	}
	return backups
}

// drawBackups appends backups to chain, drawn by weight without replacement, until the chain holds
// three upstreams or no backup is left.
func (e *Engine) drawBackups(chain []*upstream.Upstream, backups []candidate) []*upstream.Upstream {
	for len(chain) < 3 && len(backups) > 0 {
		i := e.draw(backups)
		chain = append(chain, backups[i].u)
		backups[i] = backups[len(backups)-1]
		backups = backups[:len(backups)-1]
	}
	return chain
}

// finish completes a route with the tier of the primary for video requests.
func (e *Engine) finish(req Request, tier string, chain []*upstream.Upstream) (Route, error) {
	if req.Media == upstream.MediaVideo && tier == "" {
		tier = firstTier(chain[0], req.Duration, req.Resolution)
	}
	return Route{Chain: chain, Tier: tier}, nil
}

// weigh sets the weight of every candidate (score * success^2, floored at 2% of the largest).
func weigh(cands []candidate) {
	cheapest := -1.0
	for _, c := range cands {
		if cheapest < 0 || c.u.CostUSD < cheapest {
			cheapest = c.u.CostUSD
		}
	}
	largest := 0.0
	for i := range cands {
		c := &cands[i]
		score := Score(*c.s, c.u.Rating, c.u.SoftTimeout, cheapest, c.u.CostUSD)
		c.w = Weight(score, c.s.SuccessRate())
		largest = max(largest, c.w)
	}
	floor := largest * WeightFloor
	for i := range cands {
		if cands[i].w < floor {
			cands[i].w = floor
		}
	}
}

// fullSlotWeight is the share of its weight an upstream whose max_concurrency is reached keeps while
// another candidate has a free slot: it is drawn only when the others are full too (or rarely).
const fullSlotWeight = 1e-4

// preferFreeSlots lowers the weight of the candidates whose slots are all taken, when some candidate has
// a free one.
func (e *Engine) preferFreeSlots(cands []candidate) {
	var full [maxStack]bool
	anyFree := false
	for i := range cands {
		if i < maxStack {
			full[i] = e.slots.full(cands[i].u)
			anyFree = anyFree || !full[i]
		}
	}
	if !anyFree {
		return
	}
	for i := range cands {
		if i < maxStack && full[i] {
			cands[i].w *= fullSlotWeight
		}
	}
}

// draw returns the index of a candidate chosen with probability proportional to its weight.
func (e *Engine) draw(cands []candidate) int {
	total := 0.0
	for _, c := range cands {
		total += c.w
	}
	if total <= 0 {
		return int(e.float()*float64(len(cands))) % len(cands)
	}
	x := e.float() * total
	for i, c := range cands {
		x -= c.w
		if x < 0 {
			return i
		}
	}
	return len(cands) - 1
}

// Weights returns the current selection weight of each upstream that could serve req, keyed by name
// (for administrators and tests).
func (e *Engine) Weights(req Request) map[string]float64 {
	var cands []candidate
	need := upstream.CapabilityMask(req.Needs)
	for _, u := range e.reg.Current().All {
		if u.Media != req.Media || u.CapMask()&need != need {
			continue
		}
		s := noStats
		if en := e.lookup(u.Name); en != nil {
			if st := en.state.Load(); st != nil && (st.Disabled || st.Removed) {
				continue
			}
			s = en.stats.Load()
		}
		cands = append(cands, candidate{u: u, s: s})
	}
	weigh(cands)
	out := make(map[string]float64, len(cands))
	for _, c := range cands {
		out[c.u.Name] = c.w
	}
	return out
}

// abortError carries an error that ends Run at once without blaming the upstream.
type abortError struct{ err error }

// Error returns the caller's error text.
func (a *abortError) Error() string { return a.err.Error() }

// Unwrap returns the caller's error.
func (a *abortError) Unwrap() error { return a.err }

// Abort wraps an error of the caller's own (not the upstream's) so that Run returns it unchanged at
// once, without recording an attempt or trying another upstream.
func Abort(err error) error {
	if err == nil {
		return nil
	}
	return &abortError{err: err}
}

// attemptKey is the context key of the running attempt.
type attemptKey struct{}

// attemptCtl lets a call see and change its attempt.
type attemptCtl struct {
	tier      string
	timer     *time.Timer
	fired     atomic.Bool
	committed atomic.Bool
}

// AttemptTier returns the video tier chosen for the attempt running in ctx ("" outside Run).
func AttemptTier(ctx context.Context) string {
	if c, ok := ctx.Value(attemptKey{}).(*attemptCtl); ok {
		return c.tier
	}
	return ""
}

// Commit tells Run that the call has started delivering results (for example relayed chat bytes):
// the soft time-out stops applying and a later failure ends Run without a fallback.
func Commit(ctx context.Context) {
	if c, ok := ctx.Value(attemptKey{}).(*attemptCtl); ok {
		c.committed.Store(true)
		c.timer.Stop()
	}
}

// errSoftTimeout is the cancellation cause of an attempt that ran past its soft time-out.
var errSoftTimeout = errors.New("soft time-out")

// Run plans req and calls call with each upstream of the chain until one succeeds: the same upstream
// is retried at most MaxRetries times for transient errors, with jittered back-off, and any other
// error moves on at once, reporting SwitchNote to progress. Each attempt runs under the upstream's soft
// time-out and is recorded. Errors it returns are safe to show tenants (see RunError).
func (e *Engine) Run(ctx context.Context, req Request, progress func(note string), call func(ctx context.Context, u *upstream.Upstream) error) error {
	route, err := e.Route(req)
	if err != nil {
		return err
	}
	run := &RunError{}
	for i, u := range route.Chain {
		if i > 0 && progress != nil {
			progress(fmt.Sprintf(SwitchNote, i))
		}
		for try := 0; ; try++ {
			if try > 0 {
				if err := e.backoff(ctx, try); err != nil {
					run.Cause = err
					return run
				}
			}
			release, err := e.slots.acquire(ctx, u)
			if err != nil {
				run.Cause = err
				return run
			}
			ctl := &attemptCtl{tier: route.Tier}
			actx, cancel := context.WithCancelCause(context.WithValue(ctx, attemptKey{}, ctl))
			ctl.timer = time.AfterFunc(u.SoftTimeout, func() {
				ctl.fired.Store(true)
				cancel(errSoftTimeout)
			})
			start := time.Now()
			err = call(actx, u)
			elapsed := time.Since(start)
			ctl.timer.Stop()
			cancel(nil)
			release()

			var abort *abortError
			if errors.As(err, &abort) {
				return abort.err
			}
			if err != nil && ctx.Err() != nil && !ctl.fired.Load() {
				// The caller gave up (job deadline, shutdown): not the upstream's fault.
				run.Cause = ctx.Err()
				return run
			}
			class := upstream.ClassOf(err)
			if ctl.fired.Load() && err != nil {
				class = upstream.ClassTransient
				err = &upstream.Error{Class: class, Upstream: u.Name, Code: "soft_timeout",
					Message: fmt.Sprintf("no answer within %s", u.SoftTimeout), Err: err}
			}
			e.record(ctx, Attempt{Upstream: u.Name, At: time.Now(), OK: err == nil, LatencyMS: elapsed.Milliseconds(), Class: string(class)})
			if err == nil {
				return nil
			}
			run.Attempts = append(run.Attempts, AttemptError{Upstream: u.Name, Provider: u.Provider, Class: class, Err: err})
			e.log.Warn("routing: upstream attempt failed", "upstream", u.Name, "provider", u.Provider,
				"class", string(class), "try", try, "latency_ms", elapsed.Milliseconds(), "err", err)
			if class == upstream.ClassRevoked || class == upstream.ClassUnpaid {
				e.markRemoved(ctx, u.Name, class, err)
			}
			if ctl.committed.Load() {
				return run
			}
			if class != upstream.ClassTransient || try >= e.opts.MaxRetries {
				break
			}
		}
	}
	return run
}

// backoff sleeps before retry number try: RetryBase doubled per retry, jittered by ±50%.
func (e *Engine) backoff(ctx context.Context, try int) error {
	d := e.opts.RetryBase << (try - 1)
	d = time.Duration(float64(d) * (0.5 + e.float()))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// AttemptError is one failed attempt of a Run.
type AttemptError struct {
	Upstream string
	Provider string
	Class    upstream.Class
	Err      error
}

// RunError is returned by Run when no upstream succeeded; Error is safe for tenants, Detail is for logs.
type RunError struct {
	Attempts []AttemptError
	Cause    error // set when the caller's context ended the run
}

// Error returns a generic text that names no provider or channel.
func (r *RunError) Error() string {
	switch {
	case errors.Is(r.Cause, context.DeadlineExceeded):
		return "generation timed out"
	case r.Cause != nil:
		return "generation cancelled"
	case len(r.Attempts) > 0 && r.Attempts[len(r.Attempts)-1].Class == upstream.ClassCapability && len(r.Attempts) == 1:
		return "generation failed: " + upstream.SafeMessage(upstream.ClassCapability)
	default:
		return "generation failed on all upstream channels"
	}
}

// Detail returns the full account of every attempt, with upstream names, for logs.
func (r *RunError) Detail() string {
	var b strings.Builder
	b.WriteString(r.Error())
	for i, a := range r.Attempts {
		fmt.Fprintf(&b, "; attempt %d: %s/%s %s: %v", i+1, a.Provider, a.Upstream, a.Class, a.Err)
	}
	if r.Cause != nil {
		fmt.Fprintf(&b, "; cause: %v", r.Cause)
	}
	return b.String()
}

// Class returns the class of the last failed attempt.
func (r *RunError) Class() upstream.Class {
	if len(r.Attempts) == 0 {
		return upstream.ClassNone
	}
	return r.Attempts[len(r.Attempts)-1].Class
}

// Unwrap returns the caller's cause, so errors.Is(err, context.DeadlineExceeded) works.
func (r *RunError) Unwrap() error { return r.Cause }

// record adds an attempt to the cached health at once and queues it for the store.
func (e *Engine) record(ctx context.Context, a Attempt) {
	a.At = time.UnixMilli(a.At.UnixMilli())
	a.Count, a.Origin = 1, e.origin
	en := e.entryOf(a.Upstream)
	en.mu.Lock()
	en.add(a)
	old := en.stats.Load()
	s := *old
	s.Attempts++
	if a.OK {
		s.Successes++
	}
	s.RecentFailures = recentFailures(en.attempts)
	if a.LatencyMS > s.P95MS && s.Attempts < 20 {
		// With few attempts the p95 is the maximum; a full recomputation follows on refresh.
		s.P95MS = a.LatencyMS
	}
	en.stats.Store(&s)
	en.mu.Unlock()

	e.wmu.Lock()
	e.pending = append(e.pending, pendingAttempt{ctx: context.WithoutCancel(ctx), a: a})
	if !e.writing {
		e.writing = true
		go e.writeLoop()
	}
	e.wmu.Unlock()
}

// writeLoop writes queued attempts to the store until the queue is empty, then exits. After a write it
// waits WriteInterval (or a Flush) before the next one, so that under load one write carries the
// attempts of that interval (a store groups alike ones) instead of a write per attempt.
func (e *Engine) writeLoop() {
	for first := true; ; first = false {
		if !first {
			t := time.NewTimer(e.opts.WriteInterval)
			select {
			case <-t.C:
			case <-e.wake:
			}
			t.Stop()
		}
		e.wmu.Lock()
		batch := e.pending
		e.pending = nil
		if len(batch) == 0 {
			e.writing = false
			e.wmu.Unlock()
			return
		}
		e.wmu.Unlock()
		if bs, ok := e.store.(BatchHealthStore); ok && len(batch) > 1 {
			ctxs, as := make([]context.Context, len(batch)), make([]Attempt, len(batch))
			for i, p := range batch {
				ctxs[i], as[i] = p.ctx, p.a
			}
			if err := bs.RecordAttempts(ctxs, as); err != nil {
				e.log.Error("routing: unable to record upstream attempts", "count", len(as), "err", err)
			}
			continue
		}
		for _, p := range batch {
			ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
			if err := e.store.RecordAttempt(ctx, p.a); err != nil {
				e.log.Error("routing: unable to record upstream attempt", "upstream", p.a.Upstream, "err", err)
			}
			cancel()
		}
	}
}

// Flush waits until every recorded attempt has been written to the store.
func (e *Engine) Flush(ctx context.Context) error {
	for {
		e.wmu.Lock()
		done := !e.writing && len(e.pending) == 0
		e.wmu.Unlock()
		if done {
			return nil
		}
		select {
		case e.wake <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// maybeRefresh starts a background refresh when the cached health is older than RefreshInterval.
func (e *Engine) maybeRefresh() {
	last := e.lastRefresh.Load()
	if time.Now().UnixNano()-last < int64(e.opts.RefreshInterval) {
		return
	}
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer e.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Refresh(ctx); err != nil {
			e.log.Warn("routing: unable to refresh upstream health", "err", err)
		}
	}()
}

// Refresh reloads attempts and states from the store: the whole window every FullRefresh, otherwise
// only what was recorded since the previous refresh (with some overlap).
func (e *Engine) Refresh(ctx context.Context) error {
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	now := time.Now()
	full := e.lastFull.IsZero() || now.Sub(e.lastFull) >= e.opts.FullRefresh
	since := now.Add(-Window)
	if !full {
		since = e.lastSince.Add(-(2*e.opts.RefreshInterval + 10*time.Second))
	}
	// The attempts of this engine are in memory already: read those of the others (other replicas,
	// earlier processes).
	var attempts []Attempt
	var err error
	if ohs, ok := e.store.(OriginHealthStore); ok {
		attempts, err = ohs.AttemptsSinceExcept(ctx, since, e.origin)
	} else {
		attempts, err = e.store.AttemptsSince(ctx, since)
	}
	if err != nil {
		e.lastRefresh.Store(now.UnixNano()) // do not hammer a failing store
		return fmt.Errorf("routing: load attempts: %w", err)
	}
	states, err := e.store.States(ctx)
	if err != nil {
		e.lastRefresh.Store(now.UnixNano())
		return fmt.Errorf("routing: load states: %w", err)
	}
	byName := map[string][]Attempt{}
	for _, a := range attempts {
		if a.Origin == e.origin {
			continue
		}
		a.At = time.UnixMilli(a.At.UnixMilli())
		byName[a.Upstream] = append(byName[a.Upstream], a)
	}
	e.mu.RLock()
	for name := range e.entries {
		if _, ok := byName[name]; !ok {
			byName[name] = nil // still trim old attempts
		}
	}
	e.mu.RUnlock()
	cut := now.Add(-Window)
	for name, list := range byName {
		en := e.entryOf(name)
		en.mu.Lock()
		if full {
			// Keep this engine's own attempts; replace the others' with what the store holds.
			own := en.attempts[:0:0]
			for _, a := range en.attempts {
				if a.Origin == e.origin {
					own = append(own, a)
				}
			}
			en.attempts = append(own, list...)
		} else {
			en.attempts = merge(en.attempts, list, since)
		}
		en.group = nil // indexes change below
		sortAttempts(en.attempts)
		i := 0
		for i < len(en.attempts) && en.attempts[i].At.Before(cut) {
			i++
		}
		en.attempts = slices.Clip(en.attempts[i:])
		s := computeStats(en.attempts)
		en.stats.Store(&s)
		en.mu.Unlock()
	}
	e.applyStates(states)
	if full {
		e.lastFull = now
	}
	e.lastSince = now
	e.lastRefresh.Store(now.UnixNano())
	return nil
}

// applyStates makes the stored states (disabled, removed) the ones routing and List use.
func (e *Engine) applyStates(states []State) {
	known := map[string]bool{}
	for _, s := range states {
		st := s
		known[s.Upstream] = true
		en := e.entryOf(s.Upstream)
		if !st.Disabled && !st.Removed {
			en.state.Store(nil)
		} else {
			en.state.Store(&st)
		}
	}
	e.mu.RLock()
	for name, en := range e.entries {
		if !known[name] {
			en.state.Store(nil)
		}
	}
	e.mu.RUnlock()
}

// Follow keeps an engine current while it does not route (an idle replica): every `every` it reloads
// the upstreams' states (a removal, a probe's restoration, an administrator's disable on another
// replica), and the health scores once they are RefreshInterval old, until ctx ends. Routing refreshes
// on its own as well; Follow only bounds how stale an idle replica's view (upstream-list) can be.
func (e *Engine) Follow(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, every+time.Second)
		states, err := e.store.States(sctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("routing: unable to reload upstream states", "err", err)
			}
			continue
		}
		e.applyStates(states)
		e.maybeRefresh()
	}
}

// attemptID identifies an attempt across the local cache and the store.
type attemptID struct {
	upstream string
	ms       int64
	ok       bool
	latency  int64
	class    string
	count    int
	origin   string
}

// merge adds the attempts of fresh that are not yet in have (looking only at attempts since since).
func merge(have, fresh []Attempt, since time.Time) []Attempt {
	if len(fresh) == 0 {
		return have
	}
	seen := map[attemptID]int{}
	for i := len(have) - 1; i >= 0 && !have[i].At.Before(since); i-- {
		a := have[i]
		seen[attemptID{a.Upstream, a.At.UnixMilli(), a.OK, a.LatencyMS, a.Class, a.N(), a.Origin}]++
	}
	for _, a := range fresh {
		id := attemptID{a.Upstream, a.At.UnixMilli(), a.OK, a.LatencyMS, a.Class, a.N(), a.Origin}
		if seen[id] > 0 {
			seen[id]--
			continue
		}
		have = append(have, a)
	}
	return have
}

// sortAttempts orders attempts oldest first.
func sortAttempts(a []Attempt) {
	if !slices.IsSortedFunc(a, func(x, y Attempt) int { return x.At.Compare(y.At) }) {
		slices.SortStableFunc(a, func(x, y Attempt) int { return x.At.Compare(y.At) })
	}
}
