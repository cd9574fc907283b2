package jobs

import (
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// A run that only polls is bounded by waitBudget, any other by the run budget; River's rescuer takes the
// job of a dead replica once that bound and the margin have passed.
func TestRunTimeoutFollowsTheRecordedPhase(t *testing.T) {
	waiting := &rivertype.JobRow{Metadata: []byte(`{"output":"waiting","snoozes":3}`)}
	cleared := &rivertype.JobRow{Metadata: []byte(`{"output":null,"snoozes":4}`)}
	fresh := &rivertype.JobRow{Metadata: []byte(`{}`)}
	for _, c := range []struct {
		row      *rivertype.JobRow
		deadline time.Duration
		want     time.Duration
	}{
		{fresh, 10 * time.Minute, RunBudget + runMargin},
		{cleared, 10 * time.Minute, RunBudget + runMargin},
		{waiting, 10 * time.Minute, waitBudget + runMargin},
		{fresh, 12 * time.Second, 6*time.Second + runMargin},
		{waiting, 12 * time.Second, 6*time.Second + runMargin},
	} {
		if got := runTimeout(c.row, c.deadline); got != c.want {
			t.Errorf("runTimeout(%s, deadline %s) = %s, want %s", c.row.Metadata, c.deadline, got, c.want)
		}
	}
	if waitBudget+runMargin > RescueAfter {
		t.Errorf("a poll's bound %s is past RescueAfter %s: a replica that died mid-poll waits longer than the rest", waitBudget+runMargin, RescueAfter)
	}
}
