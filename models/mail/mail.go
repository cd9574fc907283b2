// Package mail sends plain-text e-mail over SMTP. It is infrastructure: it imports nothing of the core,
// which decides what to send and when (models: sign-in codes, queued through the durable queue).
package mail

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"
)

// Timeout bounds one whole SMTP conversation.
const Timeout = 20 * time.Second

// Send sends one plain-text e-mail through the server of smtpURL: smtp://user:pass@host:port (port 25 by
// default; STARTTLS is used when the server offers it) or smtps://user:pass@host:port (implicit TLS, port
// 465 by default). The sender is the URL's `from` query parameter, by default no-reply@ the host of
// siteURL.
func Send(ctx context.Context, smtpURL, siteURL, to, subject, body string, now time.Time) error {
	u, err := url.Parse(smtpURL)
	if err != nil {
		return fmt.Errorf("parse the SMTP URL: %w", err)
	}
	from := u.Query().Get("from")
	if from == "" {
		from = "no-reply@" + hostOf(siteURL)
	}
	return sendSMTP(ctx, u, from, to, message(from, to, subject, body, now))
}

// hostOf returns the host name of a URL, "localhost" when it has none.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "localhost"
}

// message formats an RFC 5322 message with a UTF-8 plain-text body.
func message(from, to, subject, body string, now time.Time) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\n", (&mail.Address{Address: from}).String())
	fmt.Fprintf(&b, "To: %s\r\n", (&mail.Address{Address: to}).String())
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", subject))
	fmt.Fprintf(&b, "Date: %s\r\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <%s@%s>\r\n", messageID(), from[strings.LastIndex(from, "@")+1:])
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString(strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n"))
	return []byte(b.String())
}

// sendSMTP delivers msg over one SMTP conversation bounded by Timeout.
func sendSMTP(ctx context.Context, u *url.URL, from, to string, msg []byte) error {
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = "25"
		if u.Scheme == "smtps" {
			port = "465"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if u.Scheme == "smtps" {
		conn = tls.Client(conn, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12})
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok && u.Scheme == "smtp" {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return err
		}
	}
	if u.User != nil && u.User.Username() != "" {
		pass, _ := u.User.Password()
		if err := c.Auth(smtp.PlainAuth("", u.User.Username(), pass, host)); err != nil {
			return err
		}
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// messageID returns a random, unique local part for a Message-ID.
func messageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
