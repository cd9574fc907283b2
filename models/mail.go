package models

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"
)

// mailTimeout bounds one whole SMTP conversation.
const mailTimeout = 20 * time.Second

// SendMail sends one plain-text e-mail through SERVICE_SMTP_URL, or writes it to the log when that is unset.
//
// The URL is smtp://user:pass@host:port (port 25 by default; STARTTLS is used when the server offers it)
// or smtps://user:pass@host:port (implicit TLS, port 465 by default). The sender is the `from` query
// parameter (smtp://host:25?from=studio@example.com), by default no-reply@ the host of SERVICE_BASE_URL.
func (au *AuthService) SendMail(ctx context.Context, to, subject, body string) error {
	a := au.a
	if strings.ContainsAny(to, "\r\n") || strings.ContainsAny(subject, "\r\n") {
		return Invalid("e-mail address or subject contains a line break")
	}
	if a.Config.SMTPURL == "" {
		slog.InfoContext(ctx, "e-mail not sent (SERVICE_SMTP_URL is unset)", "to", to, "subject", subject, "body", body)
		return nil
	}
	u, err := url.Parse(a.Config.SMTPURL)
	if err != nil {
		return Internal("mail: parse SERVICE_SMTP_URL", err)
	}
	from := u.Query().Get("from")
	if from == "" {
		from = "no-reply@" + hostOf(a.Config.BaseURL)
	}
	msg := mailMessage(from, to, subject, body, a.Now())
	if err := sendSMTP(ctx, u, from, to, msg); err != nil {
		return &Error{Kind: KindUnavailable, Message: "the e-mail could not be sent; try again later", Err: fmt.Errorf("mail: %w", err)}
	}
	return nil
}

// queuedMail is an e-mail waiting on the queue, sealed with the service secret (it may hold a code).
type queuedMail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// queueMailTx puts one e-mail on the durable queue inside tx: a worker sends it after the transaction
// commits (DeliverQueuedMail), so the request that asked for it neither waits for the mail server nor
// shows whether a message was sent. Without a queue (an App without workers: models tests, offline
// tools) the returned function sends it; call it after the transaction commits.
func (a *App) queueMailTx(tx *gorm.DB, to, subject, body string) (sendNow func(context.Context) error, err error) {
	if strings.ContainsAny(to, "\r\n") || strings.ContainsAny(subject, "\r\n") {
		return nil, Invalid("e-mail address or subject contains a line break")
	}
	if a.deps.Queue == nil {
		return func(ctx context.Context) error { return a.Auth().SendMail(ctx, to, subject, body) }, nil
	}
	raw, _ := json.Marshal(queuedMail{To: to, Subject: subject, Body: body})
	if err := a.enqueue(tx, Work{Kind: WorkMail, Payload: a.sealer.Seal(string(raw))}); err != nil {
		return nil, Internal("mail: queue", err)
	}
	return func(context.Context) error { return nil }, nil
}

// DeliverQueuedMail sends an e-mail that queueMailTx put on the queue (the mail worker of jobs). A
// payload that cannot be opened (the service secret changed) is KindInvalid: retrying cannot help.
func (au *AuthService) DeliverQueuedMail(ctx context.Context, sealed string) error {
	a := au.a
	plain, err := a.sealer.Open(sealed)
	if err != nil {
		return Invalid("mail: the queued message cannot be opened with this service secret")
	}
	var m queuedMail
	if err := json.Unmarshal([]byte(plain), &m); err != nil {
		return Invalid("mail: the queued message is malformed")
	}
	return a.Auth().SendMail(ctx, m.To, m.Subject, m.Body)
}

// hostOf returns the host name of a URL, "localhost" when it has none.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "localhost"
}

// mailMessage formats an RFC 5322 message with a UTF-8 plain-text body.
func mailMessage(from, to, subject, body string, now time.Time) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\n", (&mail.Address{Address: from}).String())
	fmt.Fprintf(&b, "To: %s\r\n", (&mail.Address{Address: to}).String())
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", subject))
	fmt.Fprintf(&b, "Date: %s\r\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <%s@%s>\r\n", NewID(), from[strings.LastIndex(from, "@")+1:])
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString(strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n"))
	return []byte(b.String())
}

// sendSMTP delivers msg over one SMTP conversation bounded by mailTimeout.
func sendSMTP(ctx context.Context, u *url.URL, from, to string, msg []byte) error {
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = "25"
		if u.Scheme == "smtps" {
			port = "465"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, mailTimeout)
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
