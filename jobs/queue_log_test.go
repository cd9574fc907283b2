package jobs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// River's lines reach the log through warnings: information is dropped, errors stay errors, and an error
// that is only the stop cancelling River's context is told as information.
func TestQueueLogKeepsErrorsAndCalmsTheStop(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(warnings{slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})}).With("component", "queue")
	ctx := context.Background()

	log.InfoContext(ctx, "producer: Producer job counts", "num_completed_jobs", 3)
	log.ErrorContext(ctx, "PeriodicJobEnqueuer: Error starting transaction", "error", context.Canceled.Error())
	log.ErrorContext(ctx, "JobCompleter: Error completing jobs", "error", "failed to begin: "+context.Canceled.Error())
	log.ErrorContext(ctx, "JobRescuer: Error rescuing jobs", "error", errors.New("connection refused").Error())
	log.ErrorContext(ctx, "Reindexer: Error reindexing", "error", context.DeadlineExceeded.Error())
	log.WarnContext(ctx, "elector: slow", "elapsed", "2s")

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`"level":"INFO","msg":"PeriodicJobEnqueuer: Error starting transaction"`,
		`"level":"INFO","msg":"JobCompleter: Error completing jobs"`,
		`"level":"ERROR","msg":"JobRescuer: Error rescuing jobs"`,
		`"level":"ERROR","msg":"Reindexer: Error reindexing"`,
		`"level":"WARN","msg":"elector: slow"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines logged, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.Contains(lines[i], `"component":"queue"`) {
			t.Errorf("line %d = %s\nwant it to contain %s and the component", i+1, lines[i], w)
		}
	}
}
