package modelstest

import (
	"bufio"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// SMTPSink is a minimal SMTP server on loopback that keeps every message it receives; point
// SERVICE_SMTP_URL at its URL.
type SMTPSink struct {
	// URL is the SERVICE_SMTP_URL that sends to the sink.
	URL  string
	mu   sync.Mutex
	msgs []string
	read map[string]int // per address, how many of its messages Next and LastCode returned
	gate chan struct{}  // while Hold is in force, a message's DATA is answered only once it closes
}

// NewSMTPSink starts an SMTPSink that stops when the test ends.
func NewSMTPSink(t testing.TB) *SMTPSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &SMTPSink{URL: "smtp://" + ln.Addr().String() + "?from=studio@example.com", read: map[string]int{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *SMTPSink) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(line string) { _, _ = io.WriteString(c, line+"\r\n") }
	say("220 sink ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"):
			say("250-sink")
			say("250 8BITMIME")
		case strings.HasPrefix(cmd, "DATA"):
			say("354 go on")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(l)
			}
			s.mu.Lock()
			gate := s.gate
			s.mu.Unlock()
			if gate != nil {
				<-gate
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, b.String())
			s.mu.Unlock()
			say("250 queued")
		case strings.HasPrefix(cmd, "QUIT"):
			say("221 bye")
			return
		default:
			say("250 ok")
		}
	}
}

// Count returns how many messages the sink received.
func (s *SMTPSink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

// Hold makes the sink keep every message it is sent waiting (the sender's DATA is not answered) until
// the returned release is called: a request that sent its e-mail itself would wait as long.
func (s *SMTPSink) Hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(gate)
		})
	}
}

// mailWait bounds how long Next and LastCode wait for a message: e-mail leaves through the queue.
const mailWait = 15 * time.Second

// Next waits for the next message to email that Next or LastCode has not returned yet and returns it
// (headers and body), failing the test when none arrives within mailWait.
func (s *SMTPSink) Next(t testing.TB, email string) string {
	t.Helper()
	deadline := time.Now().Add(mailWait)
	for {
		s.mu.Lock()
		to := s.to(email)
		if len(to) > s.read[email] {
			m := to[s.read[email]]
			s.read[email]++
			s.mu.Unlock()
			return m
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no new e-mail to %s within %s (%d messages in all)", email, mailWait, s.Count())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// to returns the messages sent to email, oldest first; the caller holds mu.
func (s *SMTPSink) to(email string) []string {
	var out []string
	for _, m := range s.msgs {
		if strings.Contains(m, "To: <"+email+">") {
			out = append(out, m)
		}
	}
	return out
}

// LastCode waits until a message to email arrives that Next or LastCode has not returned yet, and
// returns the first group of code in the latest message to email, failing the test when none arrives
// within mailWait or the latest has no code.
func (s *SMTPSink) LastCode(t testing.TB, email string, code *regexp.Regexp) string {
	t.Helper()
	s.Next(t, email)
	s.mu.Lock()
	defer s.mu.Unlock()
	to := s.to(email)
	s.read[email] = len(to)
	if m := code.FindStringSubmatch(to[len(to)-1]); m != nil {
		return m[1]
	}
	t.Fatalf("the latest e-mail to %s has no code: %s", email, to[len(to)-1])
	return ""
}
