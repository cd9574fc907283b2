package server

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Garbage collection under load: studio's live heap is small (about 8 MB), so with GOGC=100 a collection
// started every 8 MB allocated — several times a second under chat load, marking, assisting and sweeping
// about 9 % of the CPU. TuneGC lets a small heap grow by GCHeadroom before the next collection, and keeps
// GOGC's default proportion (100 %) for a large one, so that memory stays bounded by live heap + headroom
// or twice the live heap, whichever is more.

// GCHeadroom is the least a heap may grow between two collections while TuneGC runs.
const GCHeadroom = 32 << 20

// gcPercent returns the GOGC percentage that lets a live heap grow by GCHeadroom, at least 100 and at
// most 800.
func gcPercent(live uint64) int {
	if live == 0 {
		return 800
	}
	p := int(GCHeadroom * 100 / live)
	return min(max(p, 100), 800)
}

// TuneGC adjusts the garbage collector's percentage to the live heap every second until ctx ends, unless
// GOGC is set in the environment (then the runtime's setting stands).
func TuneGC(ctx context.Context) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := 0
	update := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if p := gcPercent(sample[0].Value.Uint64()); p != current {
			debug.SetGCPercent(p)
			current = p
		}
	}
	update()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				update()
			}
		}
	}()
}
