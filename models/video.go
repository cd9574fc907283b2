package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gorm.io/datatypes"
	"gorm.io/gorm"

	"studio/models/contract"
)

// Video tasks (spec 4.5, decision D7): a submit is validated, priced per second of the resolution and
// charged in one transaction with the task row, its usage count and its queued work. The queue (jobs)
// then starts the video at an upstream, polls it and copies the result into the media store; a failure
// or the deadline ends the task failed, and a cancel ends it cancelled, both refunded exactly once.

// VideoStatus is the status of a video task (D7).
type VideoStatus string

// Video task statuses of D7.
const (
	VideoPending   VideoStatus = "pending"
	VideoRunning   VideoStatus = "running"
	VideoDone      VideoStatus = "done"
	VideoFailed    VideoStatus = "failed"
	VideoCancelled VideoStatus = "cancelled"
)

// Ended reports whether a task in this status will not change any more.
func (s VideoStatus) Ended() bool { return s != VideoPending && s != VideoRunning }

// Limits of a video submit.
const (
	// MaxVideoImages is the most reference images a video takes (spec section 8).
	MaxVideoImages = 9
	// MaxVideoReferences bounds the reference videos and the reference audios of one submit.
	MaxVideoReferences = 9
	// maxVideoPrompt bounds the prompt, in bytes, as for images.
	maxVideoPrompt = 8000
	// maxVideoSeconds bounds a duration before rounding, far above every tier's range.
	maxVideoSeconds = 3600
)

// rateVideo is the rate-limit counter of video submits.
const rateVideo = "video"

// VideoRequest is the body of POST /api/videos (spec 4.5, D7).
type VideoRequest struct {
	Prompt        *string         `json:"prompt"`
	TemplateID    string          `json:"template_id"` // a video template's id or slug
	Input         json.RawMessage `json:"input"`
	Model         string          `json:"model"` // tier code or auto; omitted = the cheapest tier that fits
	Ratio         string          `json:"ratio"`
	Duration      *float64        `json:"duration"` // seconds; fractions are rounded up
	Resolution    string          `json:"resolution"`
	Images        []string        `json:"images"`
	Videos        []string        `json:"videos"`
	Audios        []string        `json:"audios"`
	GenerateAudio bool            `json:"generate_audio"`
}

// VideoParams is the private part of a video task as the worker needs it: it holds the resolved prompt
// (which may come from a gated template) and is never shown to tenants.
type VideoParams struct {
	Prompt        string   `json:"prompt,omitempty"`
	SpecMD        string   `json:"spec_md,omitempty"`    // spec-mode template: expanded by a chat upstream first
	SpecInput     string   `json:"spec_input,omitempty"` // the caller's one-sentence description
	TemplateID    string   `json:"template_id,omitempty"`
	Binding       string   `json:"binding,omitempty"`
	Requested     float64  `json:"requested_duration"` // the duration as sent, before rounding up
	Images        []string `json:"images,omitempty"`
	Videos        []string `json:"videos,omitempty"`
	Audios        []string `json:"audios,omitempty"`
	GenerateAudio bool     `json:"generate_audio,omitempty"`
}

// Capabilities lists the upstream capabilities the request needs (routing filters on them first).
func (p *VideoParams) Capabilities() []string {
	var caps []string
	if len(p.Images) > 0 {
		caps = append(caps, "images")
	}
	if len(p.Videos) > 0 {
		caps = append(caps, "videos")
	}
	if len(p.Audios) > 0 {
		caps = append(caps, "audios")
	}
	if p.GenerateAudio {
		caps = append(caps, "generate_audio")
	}
	return caps
}

// PreparedVideo is a validated, priced video request ready to be charged and queued.
type PreparedVideo struct {
	Params VideoParams
	// Tiers are the tiers that may serve the request, preferred first: only the locked tier when the
	// caller named one; with auto, every tier that fits at the same resolution (and so the same cost).
	Tiers []string
	// Tier is the tier the task is created with; PrepareVideo sets it to Tiers[0] and the caller may
	// move it to another of Tiers (one that an upstream serves now).
	Tier       string
	Resolution string
	Duration   int // whole seconds: what is generated and billed
	Ratio      string
	Credits    int64
}

// PrepareVideo validates a video submit for the identity, resolves its prompt, tier and cost; nothing
// is stored. A duration outside the tier's range, or a resolution the tier does not offer, is refused
// here, before any upstream is contacted.
func (vs *VideoService) PrepareVideo(ctx context.Context, id *Identity, req VideoRequest) (*PreparedVideo, error) {
	a := vs.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	hasTemplate := strings.TrimSpace(req.TemplateID) != ""
	if (req.Prompt != nil) == hasTemplate {
		return nil, Invalid("send exactly one of prompt or template_id (+ input)")
	}
	p := &PreparedVideo{Ratio: strings.TrimSpace(req.Ratio)}
	model := strings.TrimSpace(req.Model)
	resolution := strings.TrimSpace(req.Resolution)
	duration := req.Duration
	if req.Prompt != nil {
		p.Params.Prompt = strings.TrimSpace(*req.Prompt)
		if p.Params.Prompt == "" {
			return nil, Invalid("prompt must not be empty")
		}
		if len(p.Params.Prompt) > maxVideoPrompt {
			return nil, Invalid("prompt is too long (at most %d bytes)", maxVideoPrompt)
		}
		if !absentJSON(req.Input) {
			return nil, Invalid("input goes with template_id, not with prompt")
		}
	} else {
		cfg, err := a.resolveVideoTemplate(ctx, id, req, &p.Params)
		if err != nil {
			return nil, err
		}
		// The caller's own values win over the template's.
		if model == "" {
			model = cfg.Model
		}
		if p.Ratio == "" {
			p.Ratio = cfg.Ratio
		}
		if resolution == "" {
			resolution = cfg.Resolution
		}
		if duration == nil && cfg.Duration > 0 {
			d := float64(cfg.Duration)
			duration = &d
		}
	}
	if p.Ratio != "" {
		if _, _, err := contract.ParseRatio(p.Ratio); err != nil {
			return nil, ContractError("", err)
		}
	}
	if resolution != "" {
		r, ok := canonicalVideoResolution(resolution)
		if !ok {
			_, err := contract.VideoCostPerSecond(resolution)
			return nil, ContractError("", err)
		}
		resolution = r
	}
	if duration == nil {
		return nil, Invalid("duration is required: the video length in seconds")
	}
	d := *duration
	if math.IsNaN(d) || d <= 0 || d > maxVideoSeconds {
		return nil, Invalid("duration must be a positive number of seconds")
	}
	if err := pickVideoTier(p, model, d, resolution); err != nil {
		return nil, err
	}
	if err := a.checkVideoRefs(ctx, &p.Params, req); err != nil {
		return nil, err
	}
	cost, err := contract.VideoCost(p.Resolution, float64(p.Duration))
	if err != nil {
		return nil, ContractError("", err)
	}
	p.Credits = int64(cost)
	p.Params.Requested = d
	if id.Kind == IdentityTenant || id.Kind == IdentityAccount {
		p.Params.Binding = id.Binding
	}
	return p, nil
}

// pickVideoTier chooses the tier (or the candidate tiers with auto) for a duration d in seconds and a
// resolution ("" for the tier's default), and sets the billed whole seconds and the resolution.
func pickVideoTier(p *PreparedVideo, model string, d float64, resolution string) error {
	seconds := int(math.Ceil(d))
	tier, err := contract.PickTier(model, seconds, resolution)
	if err != nil {
		return ContractError("", err)
	}
	if d < float64(tier.MinDuration) { // 3.5 s rounds up to 4 but is still outside 4–15 s
		return Invalid("duration: %g s is outside %d–%d s for tier %s (%s)", d, tier.MinDuration, tier.MaxDuration, tier.Code, tier.Name)
	}
	if resolution == "" {
		resolution = tier.DefaultResolution()
	}
	p.Tier, p.Tiers, p.Resolution, p.Duration = tier.Code, []string{tier.Code}, resolution, seconds
	if model != "" && model != contract.ModelAuto {
		return nil
	}
	for _, t := range contract.Tiers() {
		if t.Code != tier.Code && t.Check(seconds, resolution) == nil && d >= float64(t.MinDuration) {
			p.Tiers = append(p.Tiers, t.Code)
		}
	}
	return nil
}

// canonicalVideoResolution returns the spelling of D7 of a resolution given in any letter case.
func canonicalVideoResolution(r string) (string, bool) {
	for _, c := range contract.VideoResolutions() {
		if strings.EqualFold(c.Resolution, r) {
			return c.Resolution, true
		}
	}
	return "", false
}

// checkVideoRefs checks the reference URLs of a submit and copies them into the parameters.
func (a *App) checkVideoRefs(ctx context.Context, p *VideoParams, req VideoRequest) error {
	if len(req.Images) > MaxVideoImages {
		return Invalid("images: at most %d images, got %d", MaxVideoImages, len(req.Images))
	}
	for name, urls := range map[string][]string{"videos": req.Videos, "audios": req.Audios} {
		if len(urls) > MaxVideoReferences {
			return Invalid("%s: at most %d items, got %d", name, MaxVideoReferences, len(urls))
		}
	}
	for _, list := range []struct {
		name string
		urls []string
	}{{"images", req.Images}, {"videos", req.Videos}, {"audios", req.Audios}} {
		for i, u := range list.urls {
			if err := a.Jobs().CheckMediaURL(ctx, u); err != nil {
				return Invalid("%s[%d]: %s", list.name, i, err.Error())
			}
		}
	}
	p.Images, p.Videos, p.Audios, p.GenerateAudio = req.Images, req.Videos, req.Audios, req.GenerateAudio
	return nil
}

// resolveVideoTemplate fills the prompt from a video template: form mode substitutes the input on the
// server, spec mode keeps the specification for the worker to expand through a chat upstream. It
// returns the template's generation config, whose model, ratio, duration and resolution are defaults.
func (a *App) resolveVideoTemplate(ctx context.Context, id *Identity, req VideoRequest, p *VideoParams) (contract.VideoConfig, error) {
	t, err := a.Templates().VideoTemplateForUse(ctx, id, strings.TrimSpace(req.TemplateID))
	if err != nil {
		return contract.VideoConfig{}, err
	}
	cfgs, err := t.VideoConfigs()
	if err != nil {
		return contract.VideoConfig{}, Invalid("video template has no usable generation config")
	}
	cfg := cfgs[0]
	p.TemplateID = t.ID
	mode, err := contract.ModeOf(cfg.PromptTemplate, cfg.Fields, cfg.SkillSpecMD)
	if err != nil {
		return cfg, ContractError("", err)
	}
	if mode == contract.ModeSpec {
		var sentence string
		if !absentJSON(req.Input) && json.Unmarshal(req.Input, &sentence) != nil {
			return cfg, Invalid("input must be a one-sentence description (a string) for this template")
		}
		if sentence = strings.TrimSpace(sentence); sentence == "" {
			return cfg, Invalid("missing required field: input (a one-sentence description)")
		}
		p.SpecMD, p.SpecInput = cfg.SkillSpecMD, sentence
		return cfg, nil
	}
	input := map[string]any{}
	if !absentJSON(req.Input) {
		if err := json.Unmarshal(req.Input, &input); err != nil {
			return cfg, Invalid("input must be an object of field values for this template")
		}
	}
	if p.Prompt, err = t.FormPrompt(input); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// CreateVideoTask counts the submit against the identity's hourly limit, charges the prepared video
// and stores its task with its usage count and its queued work, all in one transaction: when anything
// is refused nothing is charged.
func (vs *VideoService) CreateVideoTask(ctx context.Context, id *Identity, p *PreparedVideo) (*VideoTask, error) {
	a := vs.a
	if !slices.Contains(p.Tiers, p.Tier) {
		return nil, Internal("video: create", fmt.Errorf("tier %q is not a candidate of the request", p.Tier))
	}
	params, err := json.Marshal(p.Params)
	if err != nil {
		return nil, Internal("video: encode params", err)
	}
	now := a.Now()
	t := &VideoTask{ID: NewID(), Status: VideoPending, Model: p.Tier, Resolution: p.Resolution, Duration: p.Duration,
		Ratio: p.Ratio, Params: datatypes.JSON(params), Credits: p.Credits, CreatedAt: now, UpdatedAt: now}
	setJobOwner(id, &t.TenantID, &t.AccountID, &t.UserID)
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.rateLimitTx(tx, id, rateVideo, 1, a.Config.GenerateRate); err != nil {
			return err
		}
		c, err := a.Credits().ChargeTx(tx, id, t.Credits, t.ID, fmt.Sprintf("video %s %s %d s", t.Model, t.Resolution, t.Duration))
		if err != nil {
			return err
		}
		t.ChargedTo = c.ChargedTo
		if err := tx.Create(t).Error; err != nil {
			return Internal("video: create", err)
		}
		if err := a.Credits().RecordUsageTx(tx, id.TenantID, ServiceVideo, id.Agent); err != nil {
			return err
		}
		if err := a.enqueue(tx, Work{Kind: WorkVideoTask, ID: t.ID}); err != nil {
			return Internal("video: enqueue", err)
		}
		return nil
	})
	if err != nil {
		return nil, asCoreError("video: create", err)
	}
	a.notify(ctx, TopicVideo, t.ID)
	return t, nil
}

// Ended reports whether the task reached a final status.
func (t *VideoTask) Ended() bool {
	return t.Status.Ended()
}

// VideoParams decodes the private parameters of the task.
func (t *VideoTask) VideoParams() (VideoParams, error) {
	var p VideoParams
	err := json.Unmarshal(t.Params, &p)
	return p, err
}

// VideoDeadline returns when the task fails if it has not ended: its creation plus the job deadline.
func (vs *VideoService) VideoDeadline(t *VideoTask) time.Time {
	a := vs.a
	return t.CreatedAt.Add(a.Config.JobDeadline)
}

// VideoTaskView is the public shape of a video task (D7); it never carries the prompt, the upstream or
// its task id.
type VideoTaskView struct {
	ID         string      `json:"id"`
	Status     VideoStatus `json:"status"`
	Model      string      `json:"model"`
	Resolution string      `json:"resolution"`
	Duration   int         `json:"duration"`
	Credits    int64       `json:"credits"`
	Progress   int         `json:"progress"`
	VideoURL   string      `json:"video_url,omitempty"`
	Error      *string     `json:"error"`
	CreatedAt  time.Time   `json:"created_at"`
	UpdatedAt  time.Time   `json:"updated_at"`
}

// View returns the public shape of the task.
func (t *VideoTask) View() VideoTaskView {
	v := VideoTaskView{ID: t.ID, Status: t.Status, Model: t.Model, Resolution: t.Resolution, Duration: t.Duration,
		Credits: t.Credits, Progress: t.Progress, Error: t.Error, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()}
	if t.Status == VideoDone {
		v.VideoURL = t.VideoURL
	}
	return v
}

// VideoTask returns a video task by id, with no visibility check (workers).
func (vs *VideoService) VideoTask(ctx context.Context, taskID string) (*VideoTask, error) {
	a := vs.a
	var t VideoTask
	err := a.DB.WithContext(ctx).First(&t, "id = ?", taskID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound("video task")
	}
	if err != nil {
		return nil, Internal("video: read", err)
	}
	return &t, nil
}

// VideoTaskFor returns a video task the identity may see (as jobs: a tenant key its tenant's, a member
// key or a personal login its own); any other is not found.
func (vs *VideoService) VideoTaskFor(ctx context.Context, id *Identity, taskID string) (*VideoTask, error) {
	a := vs.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	return ReadVideoTaskFor(ctx, a.DB, id, taskID)
}

// ReadVideoTaskFor is App.VideoTaskFor over the database alone, for the parts built before the App (the
// event broker).
func ReadVideoTaskFor(ctx context.Context, db *DB, id *Identity, taskID string) (*VideoTask, error) {
	return readScoped[VideoTask](ctx, db, id, taskID, "video task")
}

// Paging of the video task list (D7).
const (
	VideoPageSizeDefault = 20
	VideoPageSizeMax     = 100
)

// VideoTaskPage is one page of the video task list.
type VideoTaskPage struct {
	Items    []VideoTaskView `json:"items"`
	Total    int64           `json:"total"`
	PageNum  int             `json:"page_num"`
	PageSize int             `json:"page_size"`
}

// VideoTasks lists the video tasks the identity may see, newest first: page pageNum (from 1) of
// pageSize items (at most VideoPageSizeMax; larger sizes are cut to it), with status "" for every status.
func (vs *VideoService) VideoTasks(ctx context.Context, id *Identity, status string, pageNum, pageSize int) (*VideoTaskPage, error) {
	a := vs.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if pageNum < 1 {
		return nil, Invalid("page_num must be a positive integer")
	}
	if pageSize < 1 {
		return nil, Invalid("page_size must be a positive integer (at most %d)", VideoPageSizeMax)
	}
	pageSize = min(pageSize, VideoPageSizeMax)
	q := jobScope(a.DB.WithContext(ctx).Model(&VideoTask{}), id)
	switch VideoStatus(status) {
	case "":
	case VideoPending, VideoRunning, VideoDone, VideoFailed, VideoCancelled:
		q = q.Where("status = ?", status)
	default:
		return nil, Invalid("filter.status must be pending, running, done, failed or cancelled")
	}
	page := &VideoTaskPage{Items: []VideoTaskView{}, PageNum: pageNum, PageSize: pageSize}
	if err := q.Count(&page.Total).Error; err != nil {
		return nil, Internal("video: count", err)
	}
	offset := int64(pageNum-1) * int64(pageSize)
	if offset >= page.Total {
		return page, nil
	}
	var rows []VideoTask
	if err := q.Order("created_at DESC, id DESC").Offset(int(offset)).Limit(pageSize).Find(&rows).Error; err != nil {
		return nil, Internal("video: list", err)
	}
	for i := range rows {
		page.Items = append(page.Items, rows[i].View())
	}
	return page, nil
}

// StartVideoTask records that an upstream accepted a pending task: the task runs and remembers the
// upstream and its task id (privately). reported is the upstream's progress figure (0 when it gives none).
// It reports false, changing nothing, when the task is no longer pending (cancelled meanwhile): the
// caller then cancels the upstream task.
func (vs *VideoService) StartVideoTask(ctx context.Context, taskID, upstreamName, upstreamTaskID string, reported int) (bool, error) {
	a := vs.a
	var t VideoTask
	if err := a.DB.WithContext(ctx).Select("id, status, model, duration, progress, created_at").First(&t, "id = ?", taskID).Error; err != nil {
		return false, Internal("video: read", err)
	}
	res := a.DB.WithContext(ctx).Model(&VideoTask{}).Where("id = ? AND status = ?", taskID, VideoPending).Updates(map[string]any{
		"status": VideoRunning, "upstream": upstreamName, "upstream_task_id": upstreamTaskID,
		"progress": a.videoProgress(&t, reported), "updated_at": a.Now()})
	if res.Error != nil {
		return false, Internal("video: start", res.Error)
	}
	if res.RowsAffected != 1 {
		return false, nil
	}
	a.notify(ctx, TopicVideo, taskID)
	return true, nil
}

// VideoProgress records the progress of a running task t, as its worker read it, from the upstream's
// figure (reported, 0 when it gives none); it writes only a change. It reports false when the task is no
// longer running.
func (vs *VideoService) VideoProgress(ctx context.Context, t *VideoTask, reported int) (bool, error) {
	a := vs.a
	p := a.videoProgress(t, reported)
	if t.Status != VideoRunning || p == t.Progress {
		return t.Status == VideoRunning, nil
	}
	res := a.DB.WithContext(ctx).Model(&VideoTask{}).Where("id = ? AND status = ?", t.ID, VideoRunning).
		Updates(map[string]any{"progress": p, "updated_at": a.Now()})
	if res.Error != nil {
		return false, Internal("video: progress", res.Error)
	}
	if res.RowsAffected != 1 {
		return false, nil
	}
	t.Progress = p
	a.notify(ctx, TopicVideo, t.ID)
	return true, nil
}

// videoProgress is the progress to show for an unfinished task: the upstream's figure when it gives one
// (1..99), otherwise the time elapsed since submission against the tier's expected time
// (contract.ExpectedVideoTime), at most 95 so that only a finished video shows 100. It never goes back.
func (a *App) videoProgress(t *VideoTask, reported int) int {
	p := reported
	if p <= 0 || p >= 100 {
		elapsed := a.Now().Sub(t.CreatedAt)
		p = min(int(elapsed*100/contract.ExpectedVideoTime(t.Model, t.Duration)), 95)
	}
	return max(t.Progress, min(max(p, 0), 99))
}

// CompleteVideoTask marks a running task done with the stored video's URL and the upstream's cost. It
// reports false, changing nothing, when the task is no longer running (cancelled meanwhile).
func (vs *VideoService) CompleteVideoTask(ctx context.Context, taskID, videoURL string, costUSD float64) (bool, error) {
	a := vs.a
	now := a.Now()
	res := a.DB.WithContext(ctx).Model(&VideoTask{}).Where("id = ? AND status = ?", taskID, VideoRunning).Updates(map[string]any{
		"status": VideoDone, "video_url": videoURL, "progress": 100, "cost_usd": costUSD,
		"updated_at": now, "finished_at": now})
	if res.Error != nil {
		return false, Internal("video: complete", res.Error)
	}
	if res.RowsAffected != 1 {
		return false, nil
	}
	a.notify(ctx, TopicVideo, taskID)
	return true, nil
}

// FailVideoTask marks a pending or running task failed with a reason (shown to the caller: it never
// names an upstream) and refunds its credits in full at once, in one transaction. It reports false,
// changing nothing, when the task already ended (never refunded twice).
func (vs *VideoService) FailVideoTask(ctx context.Context, taskID, reason string) (bool, error) {
	a := vs.a
	failed := false
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		var t VideoTask
		if err := tx.First(&t, "id = ?", taskID).Error; err != nil {
			return Internal("video: read", err)
		}
		var err error
		failed, err = a.endVideoTx(tx, &t, VideoFailed, &reason)
		return err
	})
	if err != nil {
		return false, asCoreError("video: fail", err)
	}
	if failed {
		a.notify(ctx, TopicVideo, taskID)
	}
	return failed, nil
}

// CancelVideoTask cancels a pending or running task the identity may see and refunds it, in one
// transaction, and returns it as it was when cancelled (with its upstream, for the caller to cancel
// there too). An ended task is KindConflict; a task the identity may not see is not found.
func (vs *VideoService) CancelVideoTask(ctx context.Context, id *Identity, taskID string) (*VideoTask, error) {
	a := vs.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if taskID == "" {
		return nil, Invalid("id is required: the video task to cancel")
	}
	var t VideoTask
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		err := jobScope(tx, id).First(&t, "id = ?", taskID).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return NotFound("video task")
		}
		if err != nil {
			return Internal("video: read", err)
		}
		cancelled, err := a.endVideoTx(tx, &t, VideoCancelled, nil)
		if err != nil {
			return err
		}
		if !cancelled {
			return Conflict(fmt.Sprintf("video task already ended (%s): only a pending or running task can be cancelled", t.Status))
		}
		return nil
	})
	if err != nil {
		return nil, asCoreError("video: cancel", err)
	}
	a.notify(ctx, TopicVideo, taskID)
	return &t, nil
}

// endVideoTx moves a pending or running task to a final status (failed or cancelled) with an optional
// error and refunds it once, inside tx; it reports false, changing nothing, when the task already ended.
// t is updated to what was stored.
func (a *App) endVideoTx(tx *gorm.DB, t *VideoTask, status VideoStatus, reason *string) (bool, error) {
	if t.Ended() {
		return false, nil
	}
	now := a.Now()
	res := tx.Model(&VideoTask{}).Where("id = ? AND status IN ?", t.ID, []VideoStatus{VideoPending, VideoRunning}).
		Updates(map[string]any{"status": status, "error": reason, "updated_at": now, "finished_at": now})
	if res.Error != nil {
		return false, Internal("video: end", res.Error)
	}
	if res.RowsAffected != 1 {
		if err := tx.Select("status").First(t, "id = ?", t.ID).Error; err != nil {
			return false, Internal("video: read", err)
		}
		return false, nil
	}
	t.Status, t.Error, t.UpdatedAt, t.FinishedAt = status, reason, now, &now
	if _, err := a.Credits().RefundVideoTx(tx, t); err != nil {
		return false, err
	}
	return true, nil
}

// FollowVideo streams one video task's changes.
func (vs *VideoService) FollowVideo(ctx context.Context, id *Identity, taskID string) (<-chan *VideoTaskView, error) {
	f, err := vs.a.follower()
	if err != nil {
		return nil, err
	}
	return f.FollowVideo(ctx, id, taskID)
}

// SubmitVideo validates, plans and charges a video request, then queues it. With model auto the task
// may move to another tier of the same resolution and cost when no upstream serves the cheapest one now.
func (vs *VideoService) SubmitVideo(ctx context.Context, id *Identity, req VideoRequest) (*VideoTask, error) {
	p, err := vs.PrepareVideo(ctx, id, req)
	if err != nil {
		return nil, err
	}
	r, err := vs.a.router()
	if err != nil {
		return nil, err
	}
	var first error
	p.Tier = ""
	for _, tier := range p.Tiers {
		err := r.PlanVideo(tier, p.Duration, p.Resolution, &p.Params)
		if err == nil {
			p.Tier = tier
			break
		}
		if first == nil {
			first = err
		}
	}
	if p.Tier == "" {
		return nil, first
	}
	if p.Params.SpecMD != "" {
		if err := r.PlanChat(false); err != nil {
			return nil, err
		}
	}
	return vs.CreateVideoTask(ctx, id, p)
}

// CancelVideo cancels a pending or running video task of the identity with a refund, then cancels it
// at its upstream too; that last step is best effort and only logged when it fails.
func (vs *VideoService) CancelVideo(ctx context.Context, id *Identity, taskID string) (*VideoTask, error) {
	t, err := vs.CancelVideoTask(ctx, id, taskID)
	if err != nil {
		return nil, err
	}
	if r, rerr := vs.a.router(); rerr == nil {
		r.CancelUpstream(context.WithoutCancel(ctx), t.ID, t.Upstream, t.UpstreamTaskID)
	}
	return t, nil
}

// VideoService holds the video tasks: submitting, cancelling, reading and the steps the workers record.
type VideoService struct{ a *App }

// Videos returns the video tasks.
func (a *App) Videos() *VideoService { return a.svc.videos }
