package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"studio/models/media"
)

// The generation use cases: one door each. A request is checked (capability, input), planned through
// the Router port before anything is charged (400 当前无可用上游 when no upstream can serve it), then
// charged and queued in one transaction; generations answered at once (copy, image readings, chat) run
// through the Router while the caller waits.

// errNoRouter answers a use case that needs the asynchronous side on an App built without it.
var errNoRouter = &Error{Kind: KindUnavailable, Message: "generation is not available on this server process; retry later"}

func (a *App) router() (Router, error) {
	if a.deps.Router == nil {
		return nil, errNoRouter
	}
	return a.deps.Router, nil
}

// SubmitImages validates, plans and charges image requests, then queues them: all accepted or none.
func (js *JobService) SubmitImages(ctx context.Context, id *Identity, reqs []GenerateRequest) ([]*Job, error) {
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, Invalid("items must hold at least one request")
	}
	if len(reqs) > MaxBatch {
		return nil, Invalid("a batch holds at most %d items, got %d", MaxBatch, len(reqs))
	}
	r, err := js.a.router()
	if err != nil {
		return nil, err
	}
	prepared := make([]*PreparedImage, len(reqs))
	for i, req := range reqs {
		p, err := js.PrepareImage(ctx, id, req)
		if err != nil {
			if len(reqs) > 1 {
				return nil, prefixError(fmt.Sprintf("items[%d]: ", i), err)
			}
			return nil, err
		}
		if err := r.PlanImage(&p.Params); err != nil {
			return nil, err
		}
		prepared[i] = p
	}
	return js.CreateImageJobs(ctx, id, prepared)
}

// prefixError adds a prefix to the message of an invalid-input error.
func prefixError(prefix string, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == KindInvalid {
		c := *e
		c.Message = prefix + e.Message
		return &c
	}
	return err
}

// SubmitImageToTemplate charges and queues an image-to-template job (read the image, choose
// placeholders, create the template).
func (js *JobService) SubmitImageToTemplate(ctx context.Context, id *Identity, req ImageToTemplateRequest) (*Job, error) {
	p, err := js.PrepareImageToTemplate(ctx, id, req)
	if err != nil {
		return nil, err
	}
	r, err := js.a.router()
	if err != nil {
		return nil, err
	}
	if err := r.PlanChat(true); err != nil {
		return nil, err
	}
	jobs, err := js.CreateImageJobs(ctx, id, []*PreparedImage{p})
	if err != nil {
		return nil, err
	}
	return jobs[0], nil
}

// MayFollow answers whether the identity has jobs and video tasks to follow (403 when not), before a
// WebSocket connection is accepted; each Follow operation checks again.
func (js *JobService) MayFollow(id *Identity) error { return id.Require(CapGenerate) }

func (a *App) follower() (Follower, error) {
	if a.deps.Follower == nil {
		return nil, errNoRouter
	}
	return a.deps.Follower, nil
}

// Live reports whether changes can be followed on this replica (the console's live lists).
func (js *JobService) Live() bool { return js.a.deps.Follower != nil }

// FollowJob streams one image job's changes.
func (js *JobService) FollowJob(ctx context.Context, id *Identity, jobID string) (<-chan *JobView, error) {
	f, err := js.a.follower()
	if err != nil {
		return nil, err
	}
	return f.FollowJob(ctx, id, jobID)
}

// FollowJobs streams the changes of every job the identity may see.
func (js *JobService) FollowJobs(ctx context.Context, id *Identity) (<-chan *JobView, error) {
	f, err := js.a.follower()
	if err != nil {
		return nil, err
	}
	return f.FollowJobs(ctx, id)
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

// WriteArticle answers POST /api/article (spec 4.6, D8): the template's recipe becomes prompts, a chat
// upstream chosen by routing writes the copy as a JSON object, and an answer ParseArticle cannot read
// counts as that upstream's failure, so the next upstream of the chain is tried. Copy is free of credits
// and counted in usage as copy.
func (cs *CopyService) WriteArticle(ctx context.Context, id *Identity, req ArticleRequest) (*Article, error) {
	p, err := cs.PrepareArticle(ctx, id, req)
	if err != nil {
		return nil, err
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	var art *Article
	msgs := []ChatMessage{{Role: "system", Content: p.System}, {Role: "user", Content: p.User}}
	err = r.Chat(ctx, "copy generation", msgs, true, func(answer string) error {
		a, err := ParseArticle(p.Format, answer)
		art = a
		return err
	})
	if err != nil {
		return nil, err
	}
	cs.a.Credits().RecordUsage(id.TenantID, ServiceCopy, id.Agent)
	return art, nil
}

// ReadingInput is the picture of an image reading: a URL to fetch, or the bytes of an uploaded file
// (read with ReadReadingFile).
type ReadingInput struct {
	ImageURL string
	Image    []byte
	MIME     string
}

// ReadReadingFile reads an uploaded image-reading file: png, jpg or webp decided from its bytes (400
// otherwise), at most 6 MB (413 past it, as soon as the limit is passed).
func ReadReadingFile(r io.Reader) ([]byte, string, error) {
	data, kind, err := media.ReadAll(r, media.DetectImageForReading)
	if err != nil {
		return nil, "", ReadingImageError("file", err, true)
	}
	return data, kind.MIME, nil
}

// ReadingImageError explains why an input picture was refused; over the size limit is 413 for an
// uploaded file (the request itself is too large) and 400 for an image_url.
func ReadingImageError(field string, err error, uploaded bool) error {
	switch {
	case errors.Is(err, media.ErrTooLarge):
		msg := fmt.Sprintf("%s is larger than %d MB, the limit of image reading", field, media.MaxReadingImageSize>>20)
		if uploaded {
			return &Error{Kind: KindTooLarge, Message: msg, Err: err}
		}
		return &Error{Kind: KindInvalid, Message: msg, Err: err}
	case errors.Is(err, media.ErrUnsupportedType):
		return &Error{Kind: KindInvalid, Message: field + " must be a png, jpg or webp picture (the type is read from its bytes)", Err: err}
	case errors.Is(err, media.ErrBlockedAddress):
		return &Error{Kind: KindInvalid, Message: field + " points at a loopback or private address, which is not allowed: " + PrivateURLHint, Err: err}
	case errors.Is(err, media.ErrInvalidURL):
		return &Error{Kind: KindInvalid, Message: field + " must be a public http(s) URL or a link from the upload endpoint", Err: err}
	}
	return &Error{Kind: KindInvalid, Message: field + " could not be read", Err: err}
}

// ReadImage answers POST /api/reverse (spec 4.7): it checks that a vision upstream exists and reads the
// picture, then charges one credit, asks a vision upstream chosen by routing to describe the picture,
// and refunds the credit once when every upstream of the chain failed. An answer ParseReading cannot
// read counts as that upstream's failure.
func (cs *CopyService) ReadImage(ctx context.Context, id *Identity, in ReadingInput) (*Reading, error) {
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if (in.ImageURL == "") == (in.Image == nil) {
		return nil, Invalid("send exactly one of image_url (JSON body) and file (multipart body)")
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	if err := r.PlanChat(true); err != nil {
		return nil, err
	}
	img, mime := in.Image, in.MIME
	if in.ImageURL != "" {
		if img, mime, err = r.FetchPicture(ctx, in.ImageURL); err != nil {
			return nil, err
		}
	}
	charge, err := cs.ChargeReverse(ctx, id)
	if err != nil {
		return nil, err
	}
	var reading *Reading
	err = r.ReadPicture(ctx, "image reading", img, mime, ReadingInstruction, func(answer string) error {
		got, err := ParseReading(answer)
		reading = got
		return err
	})
	if err != nil {
		if _, rerr := cs.RefundReverse(context.WithoutCancel(ctx), charge); rerr != nil {
			slog.ErrorContext(ctx, "image reading: refund failed", "ref", charge.Ref, "err", rerr)
			return nil, rerr
		}
		var core *Error
		if errors.As(err, &core) {
			c := *core
			c.Message += "; the credit was refunded"
			return nil, &c
		}
		return nil, err
	}
	return reading, nil
}

// ChatMessage is one message of a conversation.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// AgentRequest is the body of POST /api/chat (D8): a conversation in messages, or one message.
type AgentRequest struct {
	Messages []ChatMessage `json:"messages"`
	// Message is one user message: a string, or an object with role and content.
	Message json.RawMessage `json:"message"`
}

// AgentReply is the answer of POST /api/chat.
type AgentReply struct {
	Message ChatMessage `json:"message"`
}

// chatRoles are the roles a caller's message may have.
var chatRoles = []string{"system", "developer", "user", "assistant"}

// conversation validates the request and returns the conversation to send.
func (req AgentRequest) conversation() ([]ChatMessage, error) {
	hasOne := len(bytes.TrimSpace(req.Message)) > 0 && string(bytes.TrimSpace(req.Message)) != "null"
	switch {
	case req.Messages != nil && hasOne:
		return nil, Invalid("send either messages or message, not both")
	case hasOne:
		var text string
		if json.Unmarshal(req.Message, &text) == nil {
			req.Messages = []ChatMessage{{Role: "user", Content: text}}
			break
		}
		var m ChatMessage
		if err := json.Unmarshal(req.Message, &m); err != nil {
			return nil, Invalid("message must be a string or an object with role and content")
		}
		if m.Role == "" {
			m.Role = "user"
		}
		req.Messages = []ChatMessage{m}
	case len(req.Messages) == 0:
		return nil, Invalid("messages is required: an array of {role, content}, or send message with one text")
	}
	for i, m := range req.Messages {
		if !slices.Contains(chatRoles, m.Role) {
			return nil, Invalid("messages[%d].role must be one of %s", i, strings.Join(chatRoles, ", "))
		}
		if strings.TrimSpace(m.Content) == "" {
			return nil, Invalid("messages[%d].content must be non-empty text", i)
		}
	}
	return req.Messages, nil
}

// errEmptyAnswer refuses an empty chat answer (that upstream failed; the next one is asked).
var errEmptyAnswer = errors.New("the answer was empty")

// AgentChat answers POST /api/chat: one completion routed like the relay, free of credits and counted
// in usage with the caller's X-CS-Agent as the agent.
func (cs *CopyService) AgentChat(ctx context.Context, id *Identity, req AgentRequest) (*AgentReply, error) {
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	msgs, err := req.conversation()
	if err != nil {
		return nil, err
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	var answer string
	err = r.Chat(ctx, "chat", msgs, false, func(got string) error {
		if strings.TrimSpace(got) == "" {
			return errEmptyAnswer
		}
		answer = got
		return nil
	})
	if err != nil {
		return nil, err
	}
	cs.a.Credits().RecordUsage(id.TenantID, ServiceChat, id.Agent)
	return &AgentReply{Message: ChatMessage{Role: "assistant", Content: answer}}, nil
}

// RelayChat answers an OpenAI chat/completions body through the relay (POST /v1/chat/completions).
func (cs *CopyService) RelayChat(ctx context.Context, id *Identity, body []byte, w http.ResponseWriter) error {
	if err := id.Require(CapGenerate); err != nil {
		return err
	}
	r, err := cs.a.router()
	if err != nil {
		return err
	}
	return r.Relay(ctx, id, body, w)
}

// ChatModels lists the models of GET /api/models.
func (cs *CopyService) ChatModels(id *Identity) ([]string, error) {
	if err := id.Require(CapListModels); err != nil {
		return nil, err
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	return r.ChatModels(), nil
}

// ModelCatalogue returns the answer of GET /api/available-models for a media type (image, the default,
// or video): channels and families with their capabilities, or tiers, each marked available when an
// upstream in rotation serves it. Provider names are left out.
func (cs *CopyService) ModelCatalogue(id *Identity, mediaType string) (any, error) {
	if err := id.Require(CapListModels); err != nil {
		return nil, err
	}
	mt, err := CatalogueMedia(mediaType)
	if err != nil {
		return nil, err
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	channels, tiers := r.Catalogue()
	if mt == CatalogueVideo {
		return NewVideoModels(tiers), nil
	}
	return NewImageModels(channels), nil
}
