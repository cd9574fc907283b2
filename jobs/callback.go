package jobs

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"studio/models"
	"studio/models/media"
	"studio/models/metrics"
)

// CallbackBody is the body POSTed to callback_url (spec section 6): exactly these fields.
type CallbackBody struct {
	JobID     string  `json:"job_id"`
	Status    string  `json:"status"`
	CDNURL    string  `json:"cdn_url,omitempty"`
	Error     *string `json:"error"`
	ElapsedMS int64   `json:"elapsed_ms"`
	CostUSD   float64 `json:"cost_usd"`
}

// SignCallback returns the Standard Webhooks signature header value for a message.
func SignCallback(secret []byte, msgID string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	fmt.Fprintf(mac, "%s.%d.", msgID, ts)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// callbackWorker delivers a job's callback; non-2xx answers are retried with back-off.
type callbackWorker struct {
	river.WorkerDefaults[CallbackArgs]
	s *Service
}

// NextRetry follows the configured back-off (about 5 s, 30 s, 2 min, 10 min, 1 h).
func (w *callbackWorker) NextRetry(job *river.Job[CallbackArgs]) time.Time {
	b := w.s.opts.CallbackBackoff
	i := job.Attempt - 1
	if i >= len(b) {
		i = len(b) - 1
	}
	if i < 0 {
		i = 0
	}
	return time.Now().Add(b[i])
}

// Timeout bounds one delivery attempt.
func (w *callbackWorker) Timeout(*river.Job[CallbackArgs]) time.Duration {
	return w.s.opts.CallbackTimeout + 5*time.Second
}

func (w *callbackWorker) Work(ctx context.Context, job *river.Job[CallbackArgs]) error {
	app := w.s.App
	j, err := app.Jobs().Job(ctx, job.Args.JobID)
	if err != nil {
		if models.KindOf(err) == models.KindNotFound {
			return nil
		}
		return err
	}
	if j.CallbackURL == "" || j.Status == models.JobPending || j.Callback == models.CallbackDelivered {
		return nil
	}
	body, _ := json.Marshal(CallbackBody{JobID: j.ID, Status: string(j.Status), CDNURL: j.CDNURL, Error: j.Error, ElapsedMS: j.ElapsedMS, CostUSD: j.CostUSD})
	secret, err := app.Jobs().CallbackKey(ctx, j)
	if err != nil {
		return err
	}
	derr := w.deliver(ctx, j, secret, body)
	if derr == nil {
		metrics.CallbackDeliveries.WithLabelValues("delivered").Inc()
		return app.Jobs().SetCallbackState(ctx, j.ID, models.CallbackDelivered, "")
	}
	state, outcome := models.CallbackPending, "retry"
	var refused *river.JobCancelError
	if job.Attempt >= job.MaxAttempts || errors.As(derr, &refused) {
		state, outcome = models.CallbackFailed, "failed"
	}
	metrics.CallbackDeliveries.WithLabelValues(outcome).Inc()
	_ = app.Jobs().SetCallbackState(ctx, j.ID, state, derr.Error())
	return derr
}

func (w *callbackWorker) deliver(ctx context.Context, j *models.Job, secret, body []byte) error {
	if err := w.s.App.Jobs().CheckCallbackURL(ctx, j.CallbackURL); err != nil {
		return river.JobCancel(err)
	}
	ts := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return river.JobCancel(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "studio-callback/1")
	req.Header.Set("webhook-id", j.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", SignCallback(secret, j.ID, ts, body))
	res, err := w.s.callbacks.Do(req)
	if errors.Is(err, media.ErrBlockedAddress) { // the name resolved to a private address at delivery: retrying cannot help
		return river.JobCancel(fmt.Errorf("callback: %w", err))
	}
	if err != nil {
		return fmt.Errorf("callback: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("callback: receiver answered %d", res.StatusCode)
	}
	return nil
}
