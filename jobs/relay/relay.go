// Package relay is the chat side of studio (spec 4.15): the OpenAI-compatible relay POST
// /api/chat/completions, the agent proxy POST /api/chat and the chat model list GET /api/models. jobs.Service
// holds a Relay and answers for it.
//
// The relay is the hot path of the service and stays off the database: the caller is authenticated
// from the identity cache, the call is counted with the batched RecordUsage, and chat costs no
// credits. The request body was read whole before routing (the gateway must read it to route); it is
// sent upstream from memory with the upstream's model substituted, and the answer is relayed with no
// upstream header, every "model" field rewritten to service-auto so that no upstream model leaks. A
// streamed answer is relayed event by event and flushed as it arrives; once its first byte is relayed
// the call is committed (routing.Commit) and a later failure ends the stream instead of falling back.
package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"studio/jobs/internal/calls"
	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
)

// Relay routes chat calls over the chat upstreams of a routing engine and counts them in the core's usage.
type Relay struct {
	app    *models.App
	engine *routing.Engine
}

// New returns the relay of app over the routing engine's chat upstreams.
func New(app *models.App, engine *routing.Engine) *Relay {
	return &Relay{app: app, engine: engine}
}

// ChatModel is the only model the relay accepts: smart routing chooses the upstream model and provider.
const ChatModel = upstream.DefaultChatModel

// Limits of the relay.
const (
	// maxRelayAnswer bounds a non-streamed answer read from an upstream.
	maxRelayAnswer = 32 << 20
	// relayChunk is the most the relay holds before writing when events arrive faster than it writes.
	relayChunk = 32 << 10
)

// checkChatBody validates a chat/completions body before routing, so that a client's mistake is a 400
// and not an upstream failure: a JSON object with model service-auto, a non-empty messages array and
// a boolean stream, if any. gjson validates and reads the few fields without decoding the messages,
// which may be long. Whether the answer is streamed is then read from the upstream's answer. It
// reports whether a stream asks for a usage chunk (stream_options.include_usage).
func checkChatBody(body []byte) (includeUsage bool, err error) {
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		return false, models.Invalid("the body must be a JSON object (OpenAI chat completions request)")
	}
	fields := gjson.GetManyBytes(body, "model", "messages", "stream", "stream_options.include_usage")
	if model := fields[0]; model.Type != gjson.String || model.Str != ChatModel {
		return false, models.InvalidParam("model", models.ReasonModelNotFound,
			"model must be %q: smart routing chooses the model and provider, so do not name a specific model", ChatModel)
	}
	if m := fields[1]; !m.IsArray() || m.Get("#").Int() == 0 {
		return false, models.InvalidParam("messages", "", "messages must be a non-empty array of chat messages")
	}
	if s := fields[2]; s.Exists() && s.Type != gjson.True && s.Type != gjson.False && s.Type != gjson.Null {
		return false, models.InvalidParam("stream", "", "stream must be true or false")
	}
	if u := fields[3]; u.Exists() && u.Type != gjson.True && u.Type != gjson.False && u.Type != gjson.Null {
		return false, models.InvalidParam("stream_options.include_usage", "", "stream_options.include_usage must be true or false")
	}
	return fields[3].Type == gjson.True, nil
}

// Completions relays an OpenAI chat/completions body (model service-auto) to a chat upstream chosen by
// routing and writes the answer to w. It returns an error only when nothing was written: then the
// caller answers with it. A failure after the answer started is logged and ends a stream with an
// error event in place of data: [DONE].
func (rl *Relay) Completions(ctx context.Context, id *models.Identity, body []byte, w http.ResponseWriter) error {
	if err := id.Require(models.CapGenerate); err != nil {
		return err
	}
	includeUsage, err := checkChatBody(body)
	if err != nil {
		return err
	}
	r := &relayed{w: w, request: body, includeUsage: includeUsage}
	err = rl.engine.Run(ctx, calls.ChatRoute, nil, func(ctx context.Context, u *upstream.Upstream) error {
		r.reset()
		resp, err := u.Chat().Relay(ctx, body)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return r.relayStream(ctx, u, resp.Body)
		}
		return r.relayJSON(ctx, u, resp)
	})
	if r.started {
		rl.app.Credits().RecordUsage(id.TenantID, models.ServiceChat, id.Agent)
		if err != nil && !errors.Is(err, errClientGone) && ctx.Err() == nil {
			slog.WarnContext(ctx, "chat relay: the answer broke off after it started", "detail", calls.RunDetail(err))
			if r.stream {
				// An error event instead of data: [DONE], as OpenAI streams report a failure mid-way.
				_ = r.write(brokenStreamEvent, true)
			}
		}
		return nil
	}
	if err != nil {
		return calls.Error(ctx, err, "chat")
	}
	return nil
}

// errClientGone ends a relay whose client stopped reading; it is not the upstream's failure.
var errClientGone = errors.New("chat relay: the client went away")

// brokenStreamEvent ends a stream whose upstream failed after the answer started.
var brokenStreamEvent = []byte(`data: {"error":{"message":"the answer broke off upstream; retry the request","type":"upstream_error"}}` + "\n\n")

// relayed writes one relayed answer.
type relayed struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool // the status line was written: no error answer, no fallback
	stream  bool // the answer is server-sent events

	// Usage (OpenAI's usage object): every whole answer has one, and a stream ends with a usage chunk
	// when the request set stream_options.include_usage. An upstream's own usage is passed on; when it
	// gives none the relay adds an estimate (about four characters a token).
	request      []byte
	includeUsage bool
	sawUsage     bool            // a relayed chunk carried a usage object
	completion   strings.Builder // streamed content so far, to estimate completion tokens
	chunkID      string          // id and created of the stream's chunks, repeated in the usage chunk
	created      int64
}

// reset forgets what an attempt that did not start the answer saw.
func (r *relayed) reset() {
	r.sawUsage, r.chunkID, r.created = false, "", 0
	r.completion.Reset()
}

// estimateTokens estimates the tokens of a text: about four characters a token, at least one.
func estimateTokens(text string) int {
	return utf8.RuneCountInString(text)/4 + 1
}

// promptText returns the text of the request's messages (string contents and text parts).
func promptText(request []byte) string {
	var b strings.Builder
	gjson.GetBytes(request, "messages").ForEach(func(_, m gjson.Result) bool {
		c := m.Get("content")
		if c.Type == gjson.String {
			b.WriteString(c.Str)
		} else {
			for _, part := range c.Get("#.text").Array() {
				b.WriteString(part.String())
			}
		}
		b.WriteByte('\n')
		return true
	})
	return b.String()
}

// usageJSON returns an estimated OpenAI usage object for the request and a completion.
func (r *relayed) usageJSON(completion string) []byte {
	p, c := estimateTokens(promptText(r.request)), estimateTokens(completion)
	return []byte(`{"prompt_tokens":` + strconv.Itoa(p) + `,"completion_tokens":` + strconv.Itoa(c) + `,"total_tokens":` + strconv.Itoa(p+c) + `}`)
}

// watchChunk notes what a relayed data payload says about usage: its usage object, if any, and its
// content delta. It reads only when the request asked for a usage chunk.
func (r *relayed) watchChunk(payload []byte) {
	if !r.includeUsage {
		return
	}
	f := gjson.GetManyBytes(payload, "usage", "id", "created", "choices.#.delta.content")
	if f[0].IsObject() {
		r.sawUsage = true
	}
	if r.chunkID == "" && f[1].Type == gjson.String {
		r.chunkID, r.created = f[1].Str, f[2].Int()
	}
	for _, c := range f[3].Array() {
		r.completion.WriteString(c.String())
	}
}

// usageChunk returns the final usage chunk of a stream (empty choices, usage estimated), or nothing
// when it was not asked for or the upstream sent its own.
func (r *relayed) usageChunk() []byte {
	if !r.includeUsage || r.sawUsage {
		return nil
	}
	id := r.chunkID
	if id == "" {
		id = "chatcmpl-relay"
	}
	created := r.created
	if created == 0 {
		created = time.Now().Unix()
	}
	idJSON, _ := json.Marshal(id)
	return []byte(`data: {"id":` + string(idJSON) + `,"object":"chat.completion.chunk","created":` + strconv.FormatInt(created, 10) +
		`,"model":"` + ChatModel + `","choices":[],"usage":` + string(r.usageJSON(r.completion.String())) + "}\n\n")
}

// start commits the attempt and writes the status line and the relay's own headers (never the
// upstream's, which may name it).
func (r *relayed) start(ctx context.Context, contentType string, length int) {
	routing.Commit(ctx)
	h := r.w.Header()
	h.Set("Content-Type", contentType)
	if length >= 0 {
		h.Set("Content-Length", strconv.Itoa(length))
	} else {
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		r.stream = true
	}
	r.w.WriteHeader(http.StatusOK)
	r.rc = http.NewResponseController(r.w)
	r.started = true
}

// write sends p to the client, flushing when asked.
func (r *relayed) write(p []byte, flush bool) error {
	if _, err := r.w.Write(p); err != nil {
		return routing.Abort(errClientGone)
	}
	if flush {
		if err := r.rc.Flush(); err != nil {
			return routing.Abort(errClientGone)
		}
	}
	return nil
}

// relayJSON relays a whole (non-streamed) answer, checking that it is JSON before anything is written,
// so that a broken answer still falls back to the next upstream.
func (r *relayed) relayJSON(ctx context.Context, u *upstream.Upstream, resp *http.Response) error {
	data, err := readAnswer(resp, maxRelayAnswer)
	if err != nil {
		return &upstream.Error{Class: upstream.ClassOther, Upstream: u.Name, Code: "read", Message: "reading the answer failed", Err: err}
	}
	if !gjson.ValidBytes(data) {
		return &upstream.Error{Class: upstream.ClassOther, Upstream: u.Name, Code: "bad_json", Message: "the answer is not JSON"}
	}
	if f := gjson.GetManyBytes(data, "usage", "choices"); !f[0].IsObject() && f[1].IsArray() {
		var content strings.Builder
		for _, c := range f[1].Get("#.message.content").Array() {
			content.WriteString(c.String())
		}
		if withUsage, err := sjson.SetRawBytes(data, "usage", r.usageJSON(content.String())); err == nil {
			data = withUsage
		}
	}
	buf := getBuffer()
	defer putBuffer(buf)
	*buf = rewriteModels((*buf)[:0], data)
	r.start(ctx, "application/json", len(*buf))
	return r.write(*buf, false)
}

// readAnswer reads a whole answer of at most limit bytes.
func readAnswer(resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, errors.New("the answer is too large")
	}
	if resp.ContentLength >= 0 {
		data := make([]byte, resp.ContentLength)
		_, err := io.ReadFull(resp.Body, data)
		return data, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = errors.New("the answer is too large")
	}
	return data, err
}

// The relay reuses its read buffers and output buffers across requests.
var (
	relayReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}
	relayBuffers = sync.Pool{New: func() any { b := make([]byte, 0, relayChunk+4<<10); return &b }}
)

// getBuffer returns an empty output buffer.
func getBuffer() *[]byte {
	b := relayBuffers.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// putBuffer returns an output buffer for reuse, unless a large answer grew it.
func putBuffer(b *[]byte) {
	if cap(*b) <= 1<<20 {
		relayBuffers.Put(b)
	}
}

// relayStream relays server-sent events line by line: every data line has its model rewritten, and
// the output is written and flushed at the end of each event when no further upstream bytes are
// already waiting (under load several events go out in one write). The stream ends with data: [DONE],
// added when an upstream ends cleanly without it.
func (r *relayed) relayStream(ctx context.Context, u *upstream.Upstream, body io.Reader) error {
	br := relayReaders.Get().(*bufio.Reader)
	br.Reset(body)
	out := getBuffer()
	defer func() {
		br.Reset(nil)
		relayReaders.Put(br)
		putBuffer(out)
	}()
	var long []byte // a line longer than the reader's buffer, being assembled
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if len(line) > 0 {
			if bytes.HasPrefix(line, dataPrefix) {
				payload := bytes.TrimSpace(line[len(dataPrefix):])
				if string(payload) == "[DONE]" {
					done = true
					*out = append(*out, r.usageChunk()...)
				} else {
					r.watchChunk(payload)
				}
				*out = rewriteModels(*out, line)
			} else {
				*out = append(*out, line...)
			}
			endOfEvent := len(bytes.TrimRight(line, "\r\n")) == 0
			if (endOfEvent && br.Buffered() == 0) || len(*out) >= relayChunk {
				if !r.started {
					r.start(ctx, "text/event-stream; charset=utf-8", -1)
				}
				if err := r.write(*out, endOfEvent); err != nil {
					return err
				}
				*out = (*out)[:0]
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return &upstream.Error{Class: upstream.ClassOther, Upstream: u.Name, Code: "stream", Message: "the stream broke off", Err: err}
		}
	}
	if !r.started && len(*out) == 0 {
		return &upstream.Error{Class: upstream.ClassOther, Upstream: u.Name, Code: "empty_stream", Message: "the stream was empty"}
	}
	if !done {
		if len(*out) > 0 && !bytes.HasSuffix(*out, []byte("\n\n")) {
			*out = append(*out, '\n')
		}
		*out = append(*out, r.usageChunk()...)
		*out = append(*out, "data: [DONE]\n\n"...)
	}
	if !r.started {
		r.start(ctx, "text/event-stream; charset=utf-8", -1)
	}
	return r.write(*out, true)
}

// dataPrefix starts the data lines of server-sent events.
var dataPrefix = []byte("data:")

// Byte patterns of rewriteModels.
var (
	modelKey   = []byte(`"model"`)
	modelValue = []byte(`"` + ChatModel + `"`)
)

// rewriteModels appends src to dst with the string value of every "model" key replaced by
// "service-auto". It works on bytes, without decoding: in JSON text an unescaped quote only delimits
// strings, so `"model"` followed by a colon is a key (an escaped quote before it is skipped).
func rewriteModels(dst, src []byte) []byte {
	for {
		i := bytes.Index(src, modelKey)
		if i < 0 {
			return append(dst, src...)
		}
		end := i + len(modelKey)
		if escaped(src, i) {
			dst = append(dst, src[:end]...)
			src = src[end:]
			continue
		}
		j := skipSpace(src, end)
		if j >= len(src) || src[j] != ':' {
			dst = append(dst, src[:end]...)
			src = src[end:]
			continue
		}
		k := skipSpace(src, j+1)
		if k >= len(src) || src[k] != '"' {
			dst = append(dst, src[:k]...)
			src = src[k:]
			continue
		}
		close := stringEnd(src, k)
		if close < 0 {
			return append(dst, src...)
		}
		dst = append(dst, src[:k]...)
		dst = append(dst, modelValue...)
		src = src[close+1:]
	}
}

// escaped reports whether the byte at i is preceded by an odd number of backslashes.
func escaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// skipSpace returns the index of the first byte at or after i that is not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index of the quote closing the JSON string opened at b[open], or -1.
func stringEnd(b []byte, open int) int {
	for i := open + 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// Models returns what the OpenAI-style GET /api/models lists: service-auto, the only model the relay
// accepts, then the families of the chat upstreams in rotation that it routes over (sorted). Upstream
// channel, provider and model names are left out.
func (rl *Relay) Models() []string {
	active := map[string]bool{}
	for _, st := range rl.engine.List() {
		active[st.Name] = st.State == routing.StateActive
	}
	seen := map[string]bool{ChatModel: true}
	var families []string
	for _, u := range rl.engine.Registry().Current().All {
		if u.Media == upstream.MediaChat && active[u.Name] && u.Family != "" && !seen[u.Family] {
			seen[u.Family] = true
			families = append(families, u.Family)
		}
	}
	sort.Strings(families)
	return append([]string{ChatModel}, families...)
}
