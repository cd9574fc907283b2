package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"studio/models"
	"studio/models/contract"
)

// jobsView is the jobs page: the identity's image jobs (a tenant: all of its tenant's), newest first,
// updated live through server-sent events, and a form to submit a prompt.
type jobsView struct {
	Chrome  chrome
	Jobs    []models.JobView
	Next    string // cursor of the next page
	Status  string // filter
	Stream  string // URL of the event stream; empty on filtered or older pages
	Prompt  string
	Ratio   string
	Ratios  []string
	Error   string
	Refresh string
}

// jobsPage lists the jobs of the signed-in identity (GET /api/jobs).
func (c *Console) jobsPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := c.jobsForm(r, v)
	p.Chrome.Notice = notice(r)
	return c.renderJobs(w, r, v, http.StatusOK, p)
}

// jobsForm fills the jobs page's form part from the query.
func (c *Console) jobsForm(r *http.Request, v *visit) jobsView {
	q := r.URL.Query()
	return jobsView{Chrome: c.chrome(v, "Jobs", consolePrefix+"/jobs"), Status: q.Get("status"),
		Ratios: contract.CommonRatios(), Ratio: "1:1", Refresh: r.URL.RequestURI()}
}

// renderJobs reads one page of jobs and renders the page with a status.
func (c *Console) renderJobs(w http.ResponseWriter, r *http.Request, v *visit, status int, p jobsView) error {
	q := r.URL.Query()
	page, err := c.app.Jobs(r.Context(), v.id, p.Status, q.Get("cursor"), 20)
	if err != nil {
		return err
	}
	p.Jobs, p.Next = page.Jobs, page.NextCursor
	if q.Get("cursor") == "" && p.Status == "" && c.opts.Events != nil {
		p.Stream = consolePrefix + "/jobs/events"
	}
	if r.Method == http.MethodPost {
		p.Refresh = consolePrefix + "/jobs"
	}
	c.render(w, r, status, jobsPage(p))
	return nil
}

// submitJob submits one image job from a prompt (the same path as POST /api/generate).
func (c *Console) submitJob(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := c.jobsForm(r, v)
	p.Prompt, p.Ratio = strings.TrimSpace(r.PostFormValue("prompt")), r.PostFormValue("ratio")
	req := models.GenerateRequest{Prompt: &p.Prompt, Ratio: p.Ratio}
	if _, err := c.opts.Jobs.SubmitImages(r.Context(), v.id, []models.GenerateRequest{req}); err != nil {
		status, msg := pageError(r, err)
		p.Error = msg
		return c.renderJobs(w, r, v, status, p)
	}
	seeOther(w, r, consolePrefix+"/jobs", "job-submitted")
	return nil
}

// jobEvent is the data of one server-sent event: the public state of a job.
type jobEvent struct {
	JobID    string  `json:"jobId"`
	Status   string  `json:"status"`
	Progress string  `json:"progress"`
	CDNURL   string  `json:"cdn_url,omitempty"`
	Error    *string `json:"error"`
	Created  string  `json:"created"`
}

// sseKeepAlive is how often an idle event stream sends a comment, so that proxies keep it open.
const sseKeepAlive = 15 * time.Second

// jobEvents streams every change of the identity's jobs as server-sent events ("job" events carrying
// the job's public state), from the event broker. After subscribing it sends the current state of the
// newest jobs once, so that a change between the page's rendering and the subscription is not missed.
func (c *Console) jobEvents(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	changes, err := c.opts.Events.FollowJobs(ctx, v.id)
	if err != nil {
		return err
	}
	page, err := c.app.Jobs(ctx, v.id, "", "", 20)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(j *models.JobView) error {
		b, _ := json.Marshal(jobEvent{JobID: j.JobID, Status: j.Status, Progress: j.Progress, CDNURL: j.CDNURL,
			Error: j.Error, Created: shortTime(j.CreatedAt)})
		if _, err := fmt.Fprintf(w, "event: job\ndata: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil || rc.Flush() != nil {
		return nil
	}
	for i := range page.Jobs {
		if send(&page.Jobs[i]) != nil {
			return nil
		}
	}
	tick := time.NewTicker(sseKeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case j, ok := <-changes:
			if !ok || send(j) != nil {
				return nil
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return nil
			}
		}
	}
}

// olderJobs is the link to the next page of jobs.
func olderJobs(p jobsView) string {
	q := url.Values{"cursor": {p.Next}}
	if p.Status != "" {
		q.Set("status", p.Status)
	}
	return consolePrefix + "/jobs?" + q.Encode()
}

// shortTime formats a time for tables, in the service's local time zone (Asia/Shanghai).
func shortTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(models.ShanghaiTZ).Format("2006-01-02 15:04")
}

// shortID shortens an id for display.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
