package models

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"gorm.io/gorm"

	"studio/models/mail"
)

// SendMail sends one plain-text e-mail through SERVICE_SMTP_URL (models/mail), or writes it to the log
// when that is unset. The sender is the URL's `from` query parameter (smtp://host:25?from=studio@example.com),
// by default no-reply@ the host of SERVICE_BASE_URL.
func (au *AuthService) SendMail(ctx context.Context, to, subject, body string) error {
	a := au.a
	if strings.ContainsAny(to, "\r\n") || strings.ContainsAny(subject, "\r\n") {
		return Invalid("e-mail address or subject contains a line break")
	}
	if a.Config.SMTPURL == "" {
		slog.InfoContext(ctx, "e-mail not sent (SERVICE_SMTP_URL is unset)", "to", to, "subject", subject, "body", body)
		return nil
	}
	if err := mail.Send(ctx, a.Config.SMTPURL, a.Config.BaseURL, to, subject, body, a.Now()); err != nil {
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
