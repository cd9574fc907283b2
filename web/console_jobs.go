package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"studio/models"
	"studio/models/contract"
)

// jobsView is the jobs page: the identity's image jobs (a tenant: all of its tenant's), newest first,
// updated live through server-sent events, its newest video tasks, and the generate forms: an image from
// a free prompt, an image from a template (its fields rendered as inputs), a video, and copy from a copy
// template (written at once and shown on the page).
type jobsView struct {
	Chrome  chrome
	Jobs    []models.JobView
	Next    string // cursor of the next page
	Status  string // filter
	Stream  string // URL of the event stream; empty on filtered or older pages
	Make    string // the form shown: makePrompt, makeTemplate, makeVideo or makeCopy
	Prompt  string
	Ratio   string
	Ratios  []string
	Error   string
	Refresh string

	// Templates are the usable templates of the form's kind (image for makeTemplate, copy for makeCopy,
	// video for makeVideo); Template is the chosen one, whose fields are the form's inputs.
	Templates []usableTemplate
	Template  *usableTemplate
	Input     map[string]string
	Article   *models.Article

	Videos        []models.VideoTaskView
	Tiers         []contract.Tier
	VideoModel    string
	VideoDuration string
}

// The forms of the jobs page (?make=).
const (
	makePrompt   = "prompt"
	makeTemplate = "template"
	makeVideo    = "video"
	makeCopy     = "copy"
)

// jobsPage lists the jobs of the signed-in identity (GET /api/jobs) and shows the form of ?make=.
func (c *Console) jobsPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := c.jobsForm(r, v, r.URL.Query().Get("make"))
	p.Chrome.Notice = notice(r, v)
	if err := c.pickTemplate(r, v, &p, r.URL.Query().Get("template")); err != nil {
		status, msg := pageError(r, err)
		p.Error = msg
		return c.renderJobs(w, r, v, status, p)
	}
	return c.renderJobs(w, r, v, http.StatusOK, p)
}

// jobsForm fills the jobs page's form part from the query.
func (c *Console) jobsForm(r *http.Request, v *visit, mk string) jobsView {
	q := r.URL.Query()
	switch mk {
	case makeTemplate, makeVideo, makeCopy:
	default:
		mk = makePrompt
	}
	return jobsView{Chrome: c.chrome(v, "Jobs", consolePrefix+"/jobs"), Status: q.Get("status"), Make: mk,
		Ratios: contract.CommonRatios(), Ratio: "1:1", Refresh: r.URL.RequestURI(), Input: map[string]string{},
		Tiers: contract.Tiers()}
}

// usableTemplate is a template the identity may generate from, as the jobs page offers it.
type usableTemplate struct {
	ID, Slug, Name, Description string
	Fields                      []contract.Field
	Spec                        bool // the template takes a one-sentence description instead of fields
}

// label names the template in the template choice: its Chinese name and its slug.
func (t usableTemplate) label() string {
	if t.Slug != "" {
		return t.Name + " (" + t.Slug + ")"
	}
	return t.Name
}

// pickTemplate fills the template choices of the form (the templates GET /api/templates or GET
// /api/video-templates lists for the identity, active and not locked) and, when id names one, the
// chosen template.
func (c *Console) pickTemplate(r *http.Request, v *visit, p *jobsView, id string) error {
	switch p.Make {
	case makeTemplate, makeCopy:
		kind := models.TemplateImage
		if p.Make == makeCopy {
			kind = models.TemplateArticle
		}
		rows, err := c.svc.Templates().ListTemplates(r.Context(), v.id, models.TemplateFilter{Type: kind})
		if err != nil {
			return err
		}
		for _, t := range rows {
			slug := ""
			if t.Slug != nil {
				slug = *t.Slug
			}
			if !t.Active || t.Locked || (kind == models.TemplateArticle && slug == "") {
				continue // copy is asked for by slug (POST /api/article)
			}
			fields, spec := firstConfigInputs(t.GenerationConfigs)
			p.Templates = append(p.Templates, usableTemplate{ID: t.ID, Slug: slug, Name: t.ZhName, Description: t.Description,
				Fields: fields, Spec: spec})
		}
	case makeVideo:
		rows, err := c.svc.Templates().ListVideoTemplates(r.Context(), v.id, "")
		if err != nil {
			return err
		}
		for _, t := range rows {
			if !t.Active || t.Locked {
				continue
			}
			fields, spec := firstConfigInputs(t.GenerationConfigs)
			p.Templates = append(p.Templates, usableTemplate{ID: t.ID, Slug: t.Slug, Name: t.ZhName, Description: t.Description,
				Fields: fields, Spec: spec})
		}
	default:
		return nil
	}
	if id == "" {
		return nil
	}
	for i := range p.Templates {
		if p.Templates[i].ID == id {
			p.Template = &p.Templates[i]
			return nil
		}
	}
	return models.NotFound("template")
}

// firstConfigInputs returns the fields of a template's first generation config as the caller sees them,
// or spec=true when the template takes a one-sentence description instead.
func firstConfigInputs(configs any) (fields []contract.Field, spec bool) {
	raw, _ := json.Marshal(configs)
	var cfgs []struct {
		Mode   string           `json:"mode"`
		Fields []contract.Field `json:"fields"`
	}
	if json.Unmarshal(raw, &cfgs) != nil || len(cfgs) == 0 {
		return nil, false
	}
	return cfgs[0].Fields, cfgs[0].Mode == string(contract.ModeSpec)
}

// renderJobs reads one page of jobs and the newest video tasks and renders the page with a status.
func (c *Console) renderJobs(w http.ResponseWriter, r *http.Request, v *visit, status int, p jobsView) error {
	q := r.URL.Query()
	page, err := c.svc.Jobs().Jobs(r.Context(), v.id, p.Status, q.Get("cursor"), 20)
	if err != nil {
		return err
	}
	p.Jobs, p.Next = page.Jobs, page.NextCursor
	videos, err := c.svc.Videos().VideoTasks(r.Context(), v.id, "", 1, 10)
	if err != nil {
		return err
	}
	p.Videos = videos.Items
	if q.Get("cursor") == "" && p.Status == "" && c.svc.Jobs().Live() {
		p.Stream = consolePrefix + "/jobs/events"
	}
	if r.Method == http.MethodPost {
		p.Refresh = consolePrefix + "/jobs"
	}
	c.render(w, r, status, jobsPage(p))
	return nil
}

// submitJob submits what the posted form asks for, through the same core calls as the REST surface: an
// image from a prompt or a template (POST /api/generate), a video (POST /api/videos), or copy (POST
// /api/article, shown on the page at once).
func (c *Console) submitJob(w http.ResponseWriter, r *http.Request, v *visit) error {
	p := c.jobsForm(r, v, r.PostFormValue("make"))
	fail := func(err error) error {
		status, msg := pageError(r, err)
		p.Error = msg
		return c.renderJobs(w, r, v, status, p)
	}
	switch p.Make {
	case makeTemplate, makeCopy:
		if err := c.pickTemplate(r, v, &p, r.PostFormValue("template_id")); err != nil {
			return fail(err)
		}
		if p.Template == nil {
			return fail(models.Invalid("choose a template first"))
		}
		input := templateInput(r, &p)
		if p.Make == makeCopy {
			art, err := c.svc.Copy().WriteArticle(r.Context(), v.id, models.ArticleRequest{TemplateSlug: p.Template.Slug, Input: input})
			if err != nil {
				return fail(err)
			}
			p.Article = art
			return c.renderJobs(w, r, v, http.StatusOK, p)
		}
		if _, err := c.svc.Jobs().SubmitImages(r.Context(), v.id, []models.GenerateRequest{{TemplateID: p.Template.ID, Input: input}}); err != nil {
			return fail(err)
		}
		seeOther(w, r, consolePrefix+"/jobs", "job-submitted")
		return nil
	case makeVideo:
		if err := c.pickTemplate(r, v, &p, r.PostFormValue("template_id")); err != nil {
			return fail(err)
		}
		p.Ratio = r.PostFormValue("ratio")
		p.VideoModel, p.VideoDuration = r.PostFormValue("model"), strings.TrimSpace(r.PostFormValue("duration"))
		req := models.VideoRequest{Model: p.VideoModel, Ratio: p.Ratio}
		if p.Template != nil {
			req.TemplateID, req.Input = p.Template.ID, templateInput(r, &p)
		} else {
			p.Prompt = strings.TrimSpace(r.PostFormValue("prompt"))
			req.Prompt = &p.Prompt
		}
		if p.VideoDuration != "" {
			d, err := strconv.ParseFloat(p.VideoDuration, 64)
			if err != nil {
				return fail(models.Invalid("duration must be a number of seconds"))
			}
			req.Duration = &d
		}
		if _, err := c.svc.Videos().SubmitVideo(r.Context(), v.id, req); err != nil {
			return fail(err)
		}
		seeOther(w, r, consolePrefix+"/jobs?make=video", "video-submitted")
		return nil
	}
	p.Prompt, p.Ratio = strings.TrimSpace(r.PostFormValue("prompt")), r.PostFormValue("ratio")
	req := models.GenerateRequest{Prompt: &p.Prompt, Ratio: p.Ratio}
	if _, err := c.svc.Jobs().SubmitImages(r.Context(), v.id, []models.GenerateRequest{req}); err != nil {
		return fail(err)
	}
	seeOther(w, r, consolePrefix+"/jobs", "job-submitted")
	return nil
}

// templateInput reads the posted values of the chosen template's inputs (in_<key>, or description for
// a spec template) as the JSON input of the request; the core checks them.
func templateInput(r *http.Request, p *jobsView) json.RawMessage {
	if p.Template.Spec {
		desc := r.PostFormValue("description")
		p.Input["description"] = desc
		raw, _ := json.Marshal(desc)
		return raw
	}
	values := map[string]string{}
	for _, f := range p.Template.Fields {
		if val := r.PostFormValue("in_" + f.Key); val != "" {
			values[f.Key] = val
			p.Input[f.Key] = val
		}
	}
	raw, _ := json.Marshal(values)
	return raw
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
	changes, err := c.svc.Jobs().FollowJobs(ctx, v.id)
	if err != nil {
		return err
	}
	page, err := c.svc.Jobs().Jobs(ctx, v.id, "", "", 20)
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
		b, _ := json.Marshal(jobEvent{JobID: j.JobID, Status: string(j.Status), Progress: j.Progress, CDNURL: j.CDNURL,
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

// shortTime formats a time for tables in the service's local time zone (Asia/Shanghai), naming the
// zone by its offset: "2026-01-02 15:04 UTC+08:00".
func shortTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(models.ShanghaiTZ).Format("2006-01-02 15:04 UTC-07:00")
}

// shortID shortens an id for display.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// isoTime is a time for the datetime attribute of <time>, in UTC.
func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// defaultVideoSeconds is the length the video form offers when no template gives one: every tier takes it.
const defaultVideoSeconds = "5"

// videoDuration is the duration the video form shows: the posted one, or the default length.
func videoDuration(p jobsView) string {
	if p.VideoDuration != "" {
		return p.VideoDuration
	}
	return defaultVideoSeconds
}

// tierLabel describes a video tier in the tier choice: its name, durations and resolutions.
func tierLabel(l lang, t contract.Tier) string {
	return l.Tf("%s: %d to %d s, %s", t.Name, t.MinDuration, t.MaxDuration, strings.Join(t.Resolutions, l.T(" or ")))
}
