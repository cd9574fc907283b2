package routing

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Scoring constants of decision D5.
const (
	// Window is how far back attempts count.
	Window = 24 * time.Hour
	// NeutralScore is the score of an upstream with no record.
	NeutralScore = 0.5
	// NeutralSuccess is the success rate assumed for an upstream with no record.
	NeutralSuccess = 0.75
	// RecentAttempts is how many of the latest attempts can lower the score.
	RecentAttempts = 5
	// RecentFailurePenalty multiplies the score once per recent failure.
	RecentFailurePenalty = 0.8
	// WeightFloor is the share of the largest candidate weight every candidate keeps (trial traffic).
	WeightFloor = 0.02
)

// Stats summarises the recorded attempts of one upstream within the window.
type Stats struct {
	Attempts       int
	Successes      int
	P95MS          int64 // 95th percentile latency of every attempt
	RecentFailures int   // failures among the latest RecentAttempts attempts
}

// SuccessRate returns successes over attempts, or NeutralSuccess with no record.
func (s Stats) SuccessRate() float64 {
	if s.Attempts == 0 {
		return NeutralSuccess
	}
	return float64(s.Successes) / float64(s.Attempts)
}

// Score returns the health score of D5:
// 0.45*success + 0.25*rating + 0.20*latency + 0.10*cost, times 0.8 per recent failure, where
// latency = clamp(1 - p95/softTimeout, 0, 1) and cost = cheapest/own (1 when own is zero).
// An upstream with no record scores NeutralScore.
func Score(s Stats, rating float64, softTimeout time.Duration, cheapest, own float64) float64 {
	if s.Attempts == 0 {
		return NeutralScore
	}
	latency := 1.0
	if softTimeout > 0 {
		latency = 1 - float64(s.P95MS)/float64(softTimeout.Milliseconds())
		latency = math.Max(0, math.Min(1, latency))
	}
	cost := 1.0
	if own > 0 {
		cost = math.Max(0, math.Min(1, cheapest/own))
	}
	score := 0.45*s.SuccessRate() + 0.25*rating + 0.20*latency + 0.10*cost
	for range min(s.RecentFailures, RecentAttempts) {
		score *= RecentFailurePenalty
	}
	return score
}

// Weight returns the selection weight score * success^2.
func Weight(score, success float64) float64 {
	return score * success * success
}

// FloorWeights raises every weight to at least WeightFloor of the largest one, in place.
func FloorWeights(w []float64) {
	if len(w) == 0 {
		return
	}
	floor := slices.Max(w) * WeightFloor
	for i := range w {
		if w[i] < floor {
			w[i] = floor
		}
	}
}

// latencyCount is a latency and how many calls took it.
type latencyCount struct {
	ms int64
	n  int
}

// percentile95 returns the nearest-rank 95th percentile of the calls' latencies; it sorts them in place.
func percentile95(latencies []latencyCount) int64 {
	total := 0
	for _, l := range latencies {
		total += l.n
	}
	if total == 0 {
		return 0
	}
	slices.SortFunc(latencies, func(a, b latencyCount) int { return cmp.Compare(a.ms, b.ms) })
	rank := max(int(math.Ceil(0.95*float64(total))), 1)
	for _, l := range latencies {
		rank -= l.n
		if rank <= 0 {
			return l.ms
		}
	}
	return latencies[len(latencies)-1].ms
}

// computeStats summarises attempts sorted oldest first, counting every call of a grouped record.
func computeStats(attempts []Attempt) Stats {
	s := Stats{RecentFailures: recentFailures(attempts)}
	lat := make([]latencyCount, 0, len(attempts))
	for _, a := range attempts {
		n := a.N()
		s.Attempts += n
		if a.OK {
			s.Successes += n
		}
		lat = append(lat, latencyCount{a.LatencyMS, n})
	}
	s.P95MS = percentile95(lat)
	return s
}

// recentFailures counts the failures among the latest RecentAttempts calls of attempts (oldest first).
func recentFailures(attempts []Attempt) int {
	left, failures := RecentAttempts, 0
	for i := len(attempts) - 1; i >= 0 && left > 0; i-- {
		n := min(attempts[i].N(), left)
		if !attempts[i].OK {
			failures += n
		}
		left -= n
	}
	return failures
}
