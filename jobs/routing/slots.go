package routing

import (
	"context"
	"sync"
	"sync/atomic"

	"studio/jobs/upstream"
)

// Slots: an upstream with max_concurrency (the provider's quota of calls at once) takes at most that many
// calls from the whole service. Each process takes its share, the bound divided by the processes alive
// (SetProcesses; at least one slot each), so the processes together never exceed it. A call that finds
// its upstream's share taken waits for a slot in order of arrival, holding no queue worker and no
// database connection; routing prefers, among the upstreams that can serve a request, those with a free
// slot. Upstreams without max_concurrency take every call at once.

// slots is the engine's bookkeeping of the calls in flight per bounded upstream.
type slots struct {
	procs  atomic.Int32 // processes alive, at least 1
	mu     sync.Mutex
	byName map[string]*slot
}

// slot is one upstream's calls in flight and the calls waiting for one, first come first served.
type slot struct {
	inUse   int
	bound   int             // the upstream's max_concurrency
	waiting []chan struct{} // closed when the slot is handed over
}

// SlotWaiter hears when a call of Run waits for a free slot and when it got one (the job's progress note
// and deadline); WithSlotWaiter puts it in Run's context.
type SlotWaiter interface {
	// Waiting is called once before a call waits for a slot.
	Waiting()
	// Acquired is called when a call that waited got its slot.
	Acquired()
}

type slotWaiterKey struct{}

// WithSlotWaiter returns ctx with w told of the waits for slots of the runs under it.
func WithSlotWaiter(ctx context.Context, w SlotWaiter) context.Context {
	return context.WithValue(ctx, slotWaiterKey{}, w)
}

// SetProcesses sets how many processes share each max_concurrency (at least 1). A larger share that
// frees slots hands them to the calls waiting.
func (e *Engine) SetProcesses(n int) {
	s := &e.slots
	if int(s.procs.Swap(int32(max(n, 1)))) == max(n, 1) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.byName {
		sl.grant(s.share(sl.bound))
	}
}

// limitOf is this process's share of u's max_concurrency; 0 for no bound.
func (s *slots) limitOf(u *upstream.Upstream) int {
	return s.share(u.MaxConcurrency)
}

// share is this process's share of a bound (0: none).
func (s *slots) share(bound int) int {
	if bound <= 0 {
		return 0
	}
	return max(bound/max(int(s.procs.Load()), 1), 1)
}

// full reports whether u has no free slot for one more call (never for an unbounded upstream).
func (s *slots) full(u *upstream.Upstream) bool {
	limit := s.limitOf(u)
	if limit == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.byName[u.Name]
	return sl != nil && (sl.inUse >= limit || len(sl.waiting) > 0)
}

// acquire takes a slot of u for one call, waiting for one in turn when they are all taken (telling the
// waiter of ctx). It returns the release of the slot, or ctx's error when ctx ended first.
func (s *slots) acquire(ctx context.Context, u *upstream.Upstream) (func(), error) {
	limit := s.limitOf(u)
	if limit == 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	if s.byName == nil {
		s.byName = map[string]*slot{}
	}
	sl := s.byName[u.Name]
	if sl == nil {
		sl = &slot{}
		s.byName[u.Name] = sl
	}
	sl.bound = u.MaxConcurrency
	release := func() {
		s.mu.Lock()
		sl.inUse--
		sl.grant(s.share(sl.bound))
		s.mu.Unlock()
	}
	if sl.inUse < limit && len(sl.waiting) == 0 {
		sl.inUse++
		s.mu.Unlock()
		return release, nil
	}
	turn := make(chan struct{})
	sl.waiting = append(sl.waiting, turn)
	s.mu.Unlock()
	w, _ := ctx.Value(slotWaiterKey{}).(SlotWaiter)
	if w != nil {
		w.Waiting()
	}
	select {
	case <-turn:
		if w != nil {
			w.Acquired()
		}
		return release, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-turn: // handed over just now: give it to the next one
		sl.inUse--
		sl.grant(s.share(sl.bound))
	default:
		for i, c := range sl.waiting {
			if c == turn {
				sl.waiting = append(sl.waiting[:i], sl.waiting[i+1:]...)
				break
			}
		}
	}
	return nil, ctx.Err()
}

// grant hands free slots to the calls waiting, in order (with s.mu held).
func (sl *slot) grant(limit int) {
	for sl.inUse < limit && len(sl.waiting) > 0 {
		sl.inUse++
		close(sl.waiting[0])
		sl.waiting[0] = nil
		sl.waiting = sl.waiting[1:]
	}
}
