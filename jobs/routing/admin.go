package routing

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"studio/jobs/upstream"
)

// Upstream states shown to administrators.
const (
	StateActive   = "active"
	StateDisabled = "disabled"
	StateRemoved  = "removed"
)

// Status is the administrator's view of one upstream.
type Status struct {
	Name        string         `json:"name"`
	Provider    string         `json:"provider"`
	Media       upstream.Media `json:"media"`
	Family      string         `json:"family"`
	Tiers       []string       `json:"tiers,omitempty"`
	Score       float64        `json:"score"`
	Weight      float64        `json:"weight"`
	SuccessRate float64        `json:"success_rate"`
	Attempts    int            `json:"attempts"`
	P95MS       int64          `json:"p95_ms"`
	State       string         `json:"state"`
	Reason      string         `json:"reason,omitempty"`
	Since       *time.Time     `json:"since,omitempty"`
}

// List returns every configured upstream with its health and state, ordered by media and name.
func (e *Engine) List() []Status {
	set := e.reg.Current()
	cheapest := map[upstream.Media]float64{}
	for _, u := range set.All {
		if c, ok := cheapest[u.Media]; !ok || u.CostUSD < c {
			cheapest[u.Media] = u.CostUSD
		}
	}
	out := make([]Status, 0, len(set.All))
	for _, u := range set.All {
		st := Status{Name: u.Name, Provider: u.Provider, Media: u.Media, Family: u.Family, Tiers: u.Tiers, State: StateActive}
		s := noStats
		if en := e.lookup(u.Name); en != nil {
			s = en.stats.Load()
			if state := en.state.Load(); state != nil {
				switch {
				case state.Disabled:
					st.State = StateDisabled
				case state.Removed:
					st.State = StateRemoved
				}
				st.Reason = state.Reason
				if !state.Since.IsZero() {
					since := state.Since
					st.Since = &since
				}
			}
		}
		st.Score = Score(*s, u.Rating, u.SoftTimeout, cheapest[u.Media], u.CostUSD)
		st.SuccessRate = s.SuccessRate()
		st.Weight = Weight(st.Score, st.SuccessRate)
		st.Attempts = s.Attempts
		st.P95MS = s.P95MS
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Media != out[j].Media {
			return out[i].Media < out[j].Media
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// state returns a copy of the current state of an upstream (zero when active).
func (e *Engine) state(name string) State {
	if en := e.lookup(name); en != nil {
		if s := en.state.Load(); s != nil {
			return *s
		}
	}
	return State{Upstream: name}
}

// setState stores a state and applies it locally at once.
func (e *Engine) setState(ctx context.Context, s State) error {
	if err := e.store.SetState(ctx, s); err != nil {
		return fmt.Errorf("routing: store state of %s: %w", s.Upstream, err)
	}
	en := e.entryOf(s.Upstream)
	if s.Disabled || s.Removed {
		en.state.Store(&s)
	} else {
		en.state.Store(nil)
	}
	return nil
}

// known returns ErrUnknownUpstream unless name is configured.
func (e *Engine) known(name string) error {
	if e.reg.Current().ByName(name) == nil {
		return fmt.Errorf("%w: %q", ErrUnknownUpstream, name)
	}
	return nil
}

// Disable takes an upstream out of rotation until Enable.
func (e *Engine) Disable(ctx context.Context, name, reason string) error {
	if err := e.known(name); err != nil {
		return err
	}
	s := e.state(name)
	s.Disabled = true
	s.Reason = reason
	if s.Reason == "" {
		s.Reason = "disabled by an administrator"
	}
	s.Since = time.Now().UTC()
	e.log.Info("routing: upstream disabled", "upstream", name, "reason", s.Reason)
	return e.setState(ctx, s)
}

// Enable puts an upstream back into rotation, clearing both an administrator's disable and a removal.
func (e *Engine) Enable(ctx context.Context, name string) error {
	if err := e.known(name); err != nil {
		return err
	}
	e.log.Info("routing: upstream enabled", "upstream", name)
	return e.setState(ctx, State{Upstream: name, Since: time.Now().UTC()})
}

// markRemoved takes an upstream with a revoked key or an unpaid account out of rotation.
func (e *Engine) markRemoved(ctx context.Context, name string, class upstream.Class, err error) {
	s := e.state(name)
	if s.Removed {
		return
	}
	s.Removed = true
	s.Since = time.Now().UTC()
	reason := "key revoked"
	if class == upstream.ClassUnpaid {
		reason = "account unpaid"
	}
	var ue *upstream.Error
	if errors.As(err, &ue) && ue.Status != 0 {
		reason = fmt.Sprintf("%s (HTTP %d %s)", reason, ue.Status, ue.Code)
	}
	if !s.Disabled {
		s.Reason = reason
	}
	e.log.Warn("routing: upstream removed from rotation", "upstream", name, "reason", reason)
	// The caller's context may be ending; the removal must still be stored.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := e.setState(sctx, s); err != nil {
		e.log.Error("routing: unable to store upstream removal", "upstream", name, "err", err)
	}
}

// Polled reports an error of a call made outside Run for a task the upstream already accepted (a poll,
// a download): a revoked key or an unpaid account takes the upstream out of rotation as it does in Run,
// so that no new work is sent there until a probe restores it. Other errors change nothing (a task's
// polls are not routing attempts).
func (e *Engine) Polled(ctx context.Context, name string, err error) {
	if class := upstream.ClassOf(err); err != nil && (class == upstream.ClassRevoked || class == upstream.ClassUnpaid) {
		e.markRemoved(ctx, name, class, err)
	}
}

// ProbeRemoved probes every removed upstream once and restores those that answer; it returns how
// many were restored. It is meant to run every 60 s.
func (e *Engine) ProbeRemoved(ctx context.Context) (int, error) {
	restored := 0
	var errs []error
	for _, u := range e.reg.Current().All {
		s := e.state(u.Name)
		if !s.Removed {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, min(u.SoftTimeout, 30*time.Second))
		err := u.Probe(pctx)
		cancel()
		if err != nil {
			e.log.Info("routing: probe failed, upstream stays removed", "upstream", u.Name, "err", err)
			continue
		}
		s.Removed = false
		if !s.Disabled {
			s.Reason = ""
		}
		s.Since = time.Now().UTC()
		if err := e.setState(ctx, s); err != nil {
			errs = append(errs, err)
			continue
		}
		e.log.Info("routing: probe succeeded, upstream restored", "upstream", u.Name)
		restored++
	}
	return restored, errors.Join(errs...)
}
