package jobs

import (
	"testing"
	"time"
)

// A two-minute video is polled every 5 s at first and near its expected end, seldom in between, and
// less and less often when it runs late; with a fixed interval (VideoPollMax = VideoPoll) it is polled
// at that interval.
func TestVideoPollsAreDenseWhereTheTaskMayEnd(t *testing.T) {
	every, most, expected := 5*time.Second, 30*time.Second, 2*time.Minute
	var at []time.Duration
	for elapsed := time.Duration(0); elapsed < expected+5*time.Second; {
		elapsed += pollDelay(every, most, elapsed, expected)
		at = append(at, elapsed)
	}
	if len(at) > 12 || at[0] != every || at[1] != 2*every {
		t.Fatalf("polls at %v: want the first two 5 s apart and at most 12 polls to the end", at)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap > most || gap < every {
			t.Fatalf("polls at %v: gap %s outside [%s, %s]", at, gap, every, most)
		}
	}
	var lastBefore time.Duration
	for _, a := range at {
		if a < expected {
			lastBefore = a
		}
	}
	if expected-lastBefore > every {
		t.Fatalf("polls at %v: the last poll before the expected end is %s before it, want at most %s", at, expected-lastBefore, every)
	}
	if d := pollDelay(every, most, expected+2*time.Minute, expected); d != most {
		t.Fatalf("two minutes late: next poll in %s, want %s", d, most)
	}
	if d := pollDelay(every, most, expected+10*time.Second, expected); d != every {
		t.Fatalf("ten seconds late: next poll in %s, want %s", d, every)
	}
	for _, elapsed := range []time.Duration{0, time.Minute, 10 * time.Minute} {
		if d := pollDelay(60*time.Millisecond, 60*time.Millisecond, elapsed, expected); d != 60*time.Millisecond {
			t.Fatalf("fixed interval: %s at %s", d, elapsed)
		}
	}
}
