package modelstest

import (
	"bufio"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// SMTPSink is a minimal SMTP server on loopback that keeps every message it receives; point
// SERVICE_SMTP_URL at its URL.
type SMTPSink struct {
	// URL is the SERVICE_SMTP_URL that sends to the sink.
	URL  string
	mu   sync.Mutex
	msgs []string
}

// NewSMTPSink starts an SMTPSink that stops when the test ends.
func NewSMTPSink(t testing.TB) *SMTPSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &SMTPSink{URL: "smtp://" + ln.Addr().String() + "?from=studio@example.com"}
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

// LastCode returns the first group of code in the latest message sent to email, failing the test when
// no message to email matches.
func (s *SMTPSink) LastCode(t testing.TB, email string, code *regexp.Regexp) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if strings.Contains(s.msgs[i], "To: <"+email+">") {
			if m := code.FindStringSubmatch(s.msgs[i]); m != nil {
				return m[1]
			}
		}
	}
	t.Fatalf("no code was e-mailed to %s (%d messages)", email, len(s.msgs))
	return ""
}
