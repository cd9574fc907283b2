package routing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"studio/jobs/upstream"
)

// pick50 returns an engine over 50 image upstreams in 5 families, each with a day of history.
func pick50(tb testing.TB) *Engine {
	tb.Helper()
	store := NewMemoryHealthStore()
	var cfgs []upstream.Config
	now := time.Now()
	for i := range 50 {
		name := fmt.Sprintf("img-%02d", i)
		caps := []upstream.Capability{upstream.CapReferenceImages, upstream.CapQuality}
		if i%3 == 0 {
			caps = append(caps, upstream.CapTransparent)
		}
		cfgs = append(cfgs, upstream.Config{
			Name: name, Provider: fmt.Sprintf("p%d", i%7), Media: upstream.MediaImage, Family: fmt.Sprintf("gen%d", i%5),
			Protocol: upstream.ProtocolBuiltin, Capabilities: caps, SoftTimeout: time.Minute,
			CostUSD: 0.01 + float64(i%4)*0.01, Rating: float64(i%10) / 10,
		})
		for j := range 40 {
			_ = store.RecordAttempt(context.Background(), Attempt{Upstream: name, At: now.Add(-time.Duration(j) * time.Minute),
				OK: (i+j)%(2+i%5) != 0, LatencyMS: int64(1000 + 100*((i*j)%50))})
		}
	}
	reg, err := upstream.NewRegistry(cfgs)
	if err != nil {
		tb.Fatal(err)
	}
	return NewEngine(reg, Options{Store: store, Seed: 11})
}

// BenchmarkPick50 measures one routing decision over 50 upstreams.
func BenchmarkPick50(b *testing.B) {
	e := pick50(b)
	req := Request{Media: upstream.MediaImage, Model: "auto", Needs: []upstream.Capability{upstream.CapReferenceImages}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Plan(req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPick50Budget keeps one decision over 50 upstreams cheap: a few allocations and well under 20 µs.
func TestPick50Budget(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	r := testing.Benchmark(BenchmarkPick50)
	t.Logf("Pick50: %d ns/op, %d allocs/op, %d B/op", r.NsPerOp(), r.AllocsPerOp(), r.AllocedBytesPerOp())
	if r.AllocsPerOp() > 3 {
		t.Errorf("got %d allocs/op, want at most 3", r.AllocsPerOp())
	}
	// The budget is 20 µs; allow slack for a loaded or instrumented (race) test machine.
	if r.NsPerOp() > 200_000 {
		t.Errorf("got %d ns/op, want well under 20 µs", r.NsPerOp())
	}
}
