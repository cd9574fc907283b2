package routing

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"studio/jobs/upstream"
)

func TestScore(t *testing.T) {
	tests := []struct {
		name           string
		stats          Stats
		rating         float64
		soft           time.Duration
		cheapest, own  float64
		score, success float64
		weight         float64
	}{
		{"no record", Stats{}, 0.9, time.Minute, 0.01, 0.04, 0.5, 0.75, 0.5 * 0.75 * 0.75},
		// 0.45*1 + 0.25*0.8 + 0.20*(1-6/60) + 0.10*(0.02/0.04) = 0.45+0.2+0.18+0.05
		{"perfect, half the price", Stats{Attempts: 10, Successes: 10, P95MS: 6000}, 0.8, time.Minute, 0.02, 0.04, 0.88, 1, 0.88},
		// (0.45*0.8 + 0.25*0.5 + 0.20*0.5 + 0.10*1) * 0.8^2 = 0.685*0.64; weight *0.8^2 again
		{"two recent failures, free", Stats{Attempts: 10, Successes: 8, P95MS: 30000, RecentFailures: 2}, 0.5, time.Minute, 0, 0, 0.4384, 0.8, 0.280576},
		// (0.45*0.25 + 0 + 0 + 0.10*1) * 0.8^3 = 0.2125*0.512; weight *0.25^2
		{"slow and failing", Stats{Attempts: 4, Successes: 1, P95MS: 90000, RecentFailures: 3}, 0, time.Minute, 0.01, 0.01, 0.1088, 0.25, 0.0068},
		// cheapest is free, this one is not: cost term 0
		{"dearer than a free peer", Stats{Attempts: 2, Successes: 2, P95MS: 0}, 1, time.Minute, 0, 0.05, 0.9, 1, 0.9},
		// five recent failures: 0.45*0 + 0.25*0.5 + 0.2*1 + 0.1*1 = 0.425 * 0.8^5
		{"all failing", Stats{Attempts: 5, Successes: 0, P95MS: 0, RecentFailures: 5}, 0.5, 10 * time.Second, 0.03, 0.03, 0.425 * 0.32768, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			score := Score(tt.stats, tt.rating, tt.soft, tt.cheapest, tt.own)
			if math.Abs(score-tt.score) > 1e-9 {
				t.Errorf("score: got %v, want %v", score, tt.score)
			}
			if got := tt.stats.SuccessRate(); math.Abs(got-tt.success) > 1e-9 {
				t.Errorf("success: got %v, want %v", got, tt.success)
			}
			if got := Weight(score, tt.stats.SuccessRate()); math.Abs(got-tt.weight) > 1e-9 {
				t.Errorf("weight: got %v, want %v", got, tt.weight)
			}
		})
	}
}

func TestFloorWeights(t *testing.T) {
	w := []float64{1, 0.01, 0.5, 0}
	FloorWeights(w)
	want := []float64{1, 0.02, 0.5, 0.02}
	for i := range w {
		if math.Abs(w[i]-want[i]) > 1e-12 {
			t.Errorf("weight %d: got %v, want %v", i, w[i], want[i])
		}
	}
}

func TestComputeStats(t *testing.T) {
	var attempts []Attempt
	for i := 1; i <= 20; i++ {
		attempts = append(attempts, Attempt{LatencyMS: int64(i * 100), OK: i != 3 && i != 17 && i != 19})
	}
	s := computeStats(attempts)
	// Nearest rank: ceil(0.95*20) = 19th smallest.
	if s.Attempts != 20 || s.Successes != 17 || s.P95MS != 1900 || s.RecentFailures != 2 {
		t.Errorf("got %+v, want 20 attempts, 17 successes, p95 1900, 2 recent failures", s)
	}
}

// historyEngine returns an engine over builtin chat upstreams whose store holds the given history:
// for each upstream, a list of outcomes (true = success) with a latency.
func historyEngine(t testing.TB, seed uint64, history map[string][]bool, latency map[string]int64, rating map[string]float64) *Engine {
	t.Helper()
	store := NewMemoryHealthStore()
	var cfgs []upstream.Config
	at := time.Now().Add(-time.Hour)
	for name, outcomes := range history {
		cfgs = append(cfgs, upstream.Config{Name: name, Provider: "p-" + name, Media: upstream.MediaChat, Protocol: upstream.ProtocolBuiltin,
			SoftTimeout: 10 * time.Second, Rating: rating[name], CostUSD: 0.01})
		for i, ok := range outcomes {
			_ = store.RecordAttempt(context.Background(), Attempt{Upstream: name, At: at.Add(time.Duration(i) * time.Second), OK: ok, LatencyMS: latency[name]})
		}
	}
	reg, err := upstream.NewRegistry(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	return NewEngine(reg, Options{Store: store, Seed: seed, RefreshInterval: time.Hour})
}

func TestSelectionFollowsWeights(t *testing.T) {
	ok := func(n, fail int) []bool {
		out := make([]bool, n)
		for i := range out {
			out[i] = i >= fail // failures first: none among the latest five
		}
		return out
	}
	e := historyEngine(t, 42,
		map[string][]bool{"good": ok(20, 0), "fair": ok(20, 4), "poor": ok(20, 10), "new": nil, "bad": ok(20, 19)},
		map[string]int64{"good": 1000, "fair": 4000, "poor": 2000, "bad": 9000},
		map[string]float64{"good": 0.9, "fair": 0.5, "poor": 0.5, "new": 0.5, "bad": 0.1})
	req := Request{Media: upstream.MediaChat}
	weights := e.Weights(req)
	total := 0.0
	for _, w := range weights {
		total += w
	}
	// The floor keeps the worst upstream at 2% of the best.
	if weights["bad"] != weights["good"]*WeightFloor {
		t.Errorf("bad: got weight %v, want the floor %v", weights["bad"], weights["good"]*WeightFloor)
	}
	const n = 10000
	counts := map[string]int{}
	for range n {
		chain, err := e.Plan(req)
		if err != nil {
			t.Fatal(err)
		}
		counts[chain[0].Name]++
	}
	chi2 := 0.0
	for name, w := range weights {
		want := n * w / total
		d := float64(counts[name]) - want
		chi2 += d * d / want
		t.Logf("%-5s weight %.4f expected %6.0f got %5d", name, w, want, counts[name])
	}
	// 4 degrees of freedom: p = 0.001 at 18.47.
	if chi2 > 18.47 {
		t.Errorf("chi-square %.2f exceeds 18.47: primaries do not follow the weights", chi2)
	}
}

func TestBackupsAreDistinct(t *testing.T) {
	e := historyEngine(t, 7, map[string][]bool{"a": nil, "b": nil, "c": nil, "d": nil}, nil, nil)
	for range 200 {
		chain, err := e.Plan(Request{Media: upstream.MediaChat})
		if err != nil {
			t.Fatal(err)
		}
		if len(chain) != 3 {
			t.Fatalf("got a chain of %d, want the primary and 2 backups", len(chain))
		}
		seen := map[string]bool{}
		for _, u := range chain {
			if seen[u.Name] {
				t.Fatalf("chain %v repeats %s", names(chain), u.Name)
			}
			seen[u.Name] = true
		}
	}
}

func names(chain []*upstream.Upstream) string {
	s := ""
	for _, u := range chain {
		s += fmt.Sprintf("%s ", u.Name)
	}
	return s
}
