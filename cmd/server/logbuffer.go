package server

import (
	"io"
	"log"
	"sync"
	"time"
)

// Logging under load: the default logger (slog's default handler writes through it) wrote every access
// log line with a system call of its own: at a few thousand chat calls a second that was 5 % of the
// process's CPU. BufferLog gathers the lines and writes them together.

// logBuffer gathers log output and writes it out when it fills, every interval, and on Stop.
type logBuffer struct {
	mu   sync.Mutex
	w    io.Writer
	buf  []byte
	stop chan struct{}
	done chan struct{}
}

// logBufferSize is how much output waits at most before it is written at once.
const logBufferSize = 64 << 10

// BufferLog makes the standard logger, and through it slog's default handler, write to w through a
// buffer written out at least every interval; the returned function writes what is left and restores
// direct writes. A line waits at most interval.
func BufferLog(w io.Writer, interval time.Duration) (stop func()) {
	b := &logBuffer{w: w, buf: make([]byte, 0, logBufferSize), stop: make(chan struct{}), done: make(chan struct{})}
	log.SetOutput(b)
	go b.loop(interval)
	return func() {
		close(b.stop)
		<-b.done
		log.SetOutput(w)
		b.flush()
	}
}

// Write keeps p (one log line); it writes the buffer out first when p does not fit.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) > cap(b.buf) {
		b.flushLocked()
		if len(p) > cap(b.buf) {
			return b.w.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *logBuffer) loop(interval time.Duration) {
	defer close(b.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.flush()
		case <-b.stop:
			return
		}
	}
}

func (b *logBuffer) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *logBuffer) flushLocked() {
	if len(b.buf) > 0 {
		_, _ = b.w.Write(b.buf)
		b.buf = b.buf[:0]
	}
}
