// Package routing chooses upstreams for generation requests (spec section 1, decision D5): it filters
// candidates by capability, state and binding, scores them from their recorded health, draws a
// fallback chain by weighted random and runs calls along it with retries.
package routing

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Attempt is one real call to an upstream, as recorded for health scoring, or several alike: Count
// calls to the same upstream with the same outcome and latency, the first of them at At. Grouping
// alike calls keeps the health of a busy upstream (thousands of chat calls a second) small in memory
// and in the store without changing its figures: success rate, p95 latency and recent failures count
// each call of a group.
type Attempt struct {
	Upstream  string
	At        time.Time
	OK        bool
	LatencyMS int64
	Class     string // "", transient, revoked, unpaid, capability, other
	Count     int    // calls this record stands for; 0 means 1
	Origin    string // the engine that made the calls (each process's engine has its own)
}

// N returns how many calls the record stands for.
func (a Attempt) N() int {
	return max(a.Count, 1)
}

// State is the routing state of an upstream that is not simply active.
type State struct {
	Upstream string
	Disabled bool   // by an administrator
	Removed  bool   // revoked key or unpaid account, until a probe succeeds
	Reason   string // why, for administrators
	Since    time.Time
}

// HealthStore persists attempts and states so that restarts keep scores and replicas share them.
type HealthStore interface {
	// RecordAttempt stores one attempt.
	RecordAttempt(ctx context.Context, a Attempt) error
	// AttemptsSince returns the attempts made at or after since.
	AttemptsSince(ctx context.Context, since time.Time) ([]Attempt, error)
	// SetState stores the state of one upstream, replacing the previous one.
	SetState(ctx context.Context, s State) error
	// States returns every stored state.
	States(ctx context.Context) ([]State, error)
}

// OriginHealthStore is a HealthStore that can leave out the attempts of one origin when reading; the
// engine uses it not to read back the attempts it recorded itself (it holds them already).
type OriginHealthStore interface {
	HealthStore
	// AttemptsSinceExcept returns the attempts made at or after since by other origins than origin.
	AttemptsSinceExcept(ctx context.Context, since time.Time, origin string) ([]Attempt, error)
}

// BatchHealthStore is a HealthStore that can also store many attempts in one write; the engine uses
// it to keep attempt recording cheap under load. ctxs[i] is the context attempt as[i] was made under.
type BatchHealthStore interface {
	HealthStore
	RecordAttempts(ctxs []context.Context, as []Attempt) error
}

// MemoryHealthStore keeps attempts and states in memory (tests, single process).
type MemoryHealthStore struct {
	mu       sync.Mutex
	attempts []Attempt
	states   map[string]State
}

// NewMemoryHealthStore returns an empty in-memory store.
func NewMemoryHealthStore() *MemoryHealthStore {
	return &MemoryHealthStore{states: map[string]State{}}
}

// RecordAttempt stores one attempt and forgets attempts older than two days.
func (m *MemoryHealthStore) RecordAttempt(ctx context.Context, a Attempt) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts = append(m.attempts, a)
	if len(m.attempts) > 1024 && time.Since(m.attempts[0].At) > 48*time.Hour {
		cut := time.Now().Add(-25 * time.Hour)
		kept := m.attempts[:0]
		for _, x := range m.attempts {
			if !x.At.Before(cut) {
				kept = append(kept, x)
			}
		}
		m.attempts = kept
	}
	return nil
}

// AttemptsSince returns the attempts made at or after since, oldest first.
func (m *MemoryHealthStore) AttemptsSince(ctx context.Context, since time.Time) ([]Attempt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Attempt
	for _, a := range m.attempts {
		if !a.At.Before(since) {
			out = append(out, a)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// SetState stores the state of one upstream.
func (m *MemoryHealthStore) SetState(ctx context.Context, s State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[s.Upstream] = s
	return nil
}

// States returns every stored state.
func (m *MemoryHealthStore) States(ctx context.Context) ([]State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]State, 0, len(m.states))
	for _, s := range m.states {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Upstream < out[j].Upstream })
	return out, nil
}
