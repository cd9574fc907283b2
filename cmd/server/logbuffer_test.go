package server

import (
	"bytes"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the flusher and the test, counting writes.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

func (s *syncBuffer) get() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String(), s.writes
}

// Log lines written through slog's default logger are gathered into few writes, in order, each out
// within the interval, and none is lost on stop.
func TestLogLinesAreWrittenTogether(t *testing.T) {
	out := &syncBuffer{}
	stop := BufferLog(out, 50*time.Millisecond)
	defer log.SetOutput(os.Stderr)
	for i := range 100 {
		slog.Info("http", "n", i)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		text, writes := out.get()
		if strings.Count(text, "INFO http") == 100 {
			if writes > 3 {
				t.Errorf("100 lines took %d writes, want them together", writes)
			}
			if strings.Index(text, "n=0\n") > strings.Index(text, "n=99\n") {
				t.Errorf("lines out of order: %s", text)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 s only %d of 100 lines were written", strings.Count(text, "INFO http"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	slog.Warn("last words")
	stop()
	if text, _ := out.get(); !strings.Contains(text, "last words") {
		t.Error("the line logged just before stop was lost")
	}
}
