package server

import "testing"

// A small live heap may grow by GCHeadroom before the next collection; a large one keeps GOGC=100
// (memory at most twice the live heap); the percentage stays within 100 and 800.
func TestGCPercentLetsSmallHeapsGrowByTheHeadroom(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 800}, {1 << 20, 800}, {8 << 20, 400}, {16 << 20, 200}, {32 << 20, 100}, {400 << 20, 100},
	} {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("live heap %d MB: GOGC %d, want %d", c.live>>20, got, c.want)
		}
	}
}
