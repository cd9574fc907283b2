package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/sjson"
)

// Limits on what is read from an upstream.
const (
	maxErrorBody = 64 << 10
	maxJSONBody  = 64 << 20 // a b64_json 4k image is large
	maxImageBody = 50 << 20
)

// sharedTransport is the tuned HTTP transport every OpenAI-compatible upstream shares.
var sharedTransport = &http.Transport{
	Proxy: http.ProxyFromEnvironment,
	DialContext: (&net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
	}).DialContext,
	ForceAttemptHTTP2:     true,
	MaxIdleConns:          1024,
	MaxIdleConnsPerHost:   256,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
}

// sharedClient has no overall time-out: every call carries a context with one.
var sharedClient = &http.Client{Transport: sharedTransport}

// openAI speaks the public OpenAI HTTP API.
type openAI struct {
	cfg    *Config
	client *http.Client
	auth   []string // the Authorization header's value (nil without a key); shared, never modified
}

// jsonContentType is the Content-Type header's value of relayed calls; shared, never modified.
var jsonContentType = []string{"application/json"}

// newOpenAI returns the adapter of an openai upstream.
func newOpenAI(cfg *Config) *openAI {
	o := &openAI{cfg: cfg, client: sharedClient}
	if cfg.APIKey != "" {
		o.auth = []string{"Bearer " + cfg.APIKey}
	}
	return o
}

// fail wraps a local failure (network, decoding) as a classified error.
func (o *openAI) fail(class Class, msg string, err error) *Error {
	if class == "" {
		class = ClassOther
		if isTimeout(err) {
			class = ClassTransient
		}
	}
	return &Error{Class: class, Upstream: o.cfg.Name, Message: msg, Err: err}
}

// newRequest builds a request to base_url + path with the upstream's key.
func (o *openAI) newRequest(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, o.cfg.BaseURL+path, body)
	if err != nil {
		return nil, o.fail(ClassOther, "build request", err)
	}
	if o.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.cfg.APIKey)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// do sends req and returns the response on a 2xx status, or a classified error.
func (o *openAI) do(req *http.Request) (*http.Response, error) {
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, o.fail("", req.Method+" "+req.URL.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		return nil, ClassifyHTTP(o.cfg.Name, resp.StatusCode, body)
	}
	return resp, nil
}

// doJSON sends req and decodes a 2xx JSON answer into out.
func (o *openAI) doJSON(req *http.Request, out any) error {
	resp, err := o.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody))
	if err != nil {
		return o.fail("", "read "+req.URL.Path, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Class: ClassOther, Upstream: o.cfg.Name, Status: resp.StatusCode, Code: "bad_json",
			Message: "invalid JSON from " + req.URL.Path, Err: err}
	}
	return nil
}

// postJSON marshals body and POSTs it to path, decoding the answer into out.
func (o *openAI) postJSON(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return o.fail(ClassOther, "encode request", err)
	}
	req, err := o.newRequest(ctx, http.MethodPost, path, bytes.NewReader(data), "application/json")
	if err != nil {
		return err
	}
	return o.doJSON(req, out)
}

// ImageSize returns the WxH size sent upstream for a ratio and resolution: the standard sizes
// 1024x1024, 1024x1536 and 1536x1024 at 1k, and the exact ratio with a long side of 2048 or 4096
// at 2k and 4k (upstreams with the large capability).
func ImageSize(ratio, resolution string) string {
	w, h := parseRatio(ratio)
	switch strings.ToLower(resolution) {
	case "2k", "4k":
		long := 2048
		if strings.EqualFold(resolution, "4k") {
			long = 4096
		}
		pw, ph := fitLongSide(w, h, long, 16)
		return fmt.Sprintf("%dx%d", pw, ph)
	}
	switch {
	case w == h:
		return "1024x1024"
	case w < h:
		return "1024x1536"
	default:
		return "1536x1024"
	}
}

// imageResponse is the answer of /images/generations and /images/edits.
type imageResponse struct {
	Data []struct {
		B64JSON string `json:"b64_json"`
		URL     string `json:"url"`
	} `json:"data"`
}

// GenerateImage calls /images/generations, or /images/edits when the request has pictures.
func (o *openAI) GenerateImage(ctx context.Context, r ImageRequest) (*Image, error) {
	if o.cfg.Media != MediaImage {
		return nil, o.fail(ClassCapability, "not an image upstream", nil)
	}
	fields := map[string]string{
		"model":  o.cfg.Model,
		"prompt": r.Prompt,
		"n":      "1",
		"size":   ImageSize(r.Ratio, r.Resolution),
	}
	if r.Quality != "" && o.cfg.Has(CapQuality) {
		fields["quality"] = r.Quality
	}
	if r.Background == "transparent" {
		fields["background"] = "transparent"
		fields["output_format"] = "png"
	}
	var out imageResponse
	if len(r.ReferenceImages) == 0 && len(r.Image) == 0 {
		body := map[string]any{}
		for k, v := range fields {
			body[k] = v
		}
		body["n"] = 1
		if err := o.postJSON(ctx, "/images/generations", body, &out); err != nil {
			return nil, err
		}
	} else {
		if err := o.edit(ctx, fields, r, &out); err != nil {
			return nil, err
		}
	}
	if len(out.Data) == 0 {
		return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_json", Message: "no image in the answer"}
	}
	var data []byte
	switch d := out.Data[0]; {
	case d.B64JSON != "":
		b, err := base64.StdEncoding.DecodeString(d.B64JSON)
		if err != nil {
			return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_json", Message: "invalid b64_json", Err: err}
		}
		data = b
	case d.URL != "":
		b, err := o.fetch(ctx, d.URL)
		if err != nil {
			return nil, err
		}
		data = b
	default:
		return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_json", Message: "empty image in the answer"}
	}
	mime := http.DetectContentType(data)
	if mime != "image/png" && mime != "image/jpeg" && mime != "image/webp" && mime != "image/gif" {
		return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_image", Message: "answer is not an image: " + mime}
	}
	return &Image{Data: data, MIME: mime}, nil
}

// edit posts a multipart /images/edits request with the pictures as image[] parts.
func (o *openAI) edit(ctx context.Context, fields map[string]string, r ImageRequest, out any) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			return o.fail(ClassOther, "encode request", err)
		}
	}
	images := r.ReferenceImages
	if len(r.Image) > 0 {
		images = append([][]byte{r.Image}, images...)
	}
	part := func(field, name string, data []byte) error {
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, field, name))
		h.Set("Content-Type", http.DetectContentType(data))
		w, err := mw.CreatePart(h)
		if err == nil {
			_, err = w.Write(data)
		}
		return err
	}
	for i, img := range images {
		if err := part("image[]", fmt.Sprintf("image-%d%s", i, extension(img)), img); err != nil {
			return o.fail(ClassOther, "encode request", err)
		}
	}
	if len(r.Mask) > 0 {
		if err := part("mask", "mask.png", r.Mask); err != nil {
			return o.fail(ClassOther, "encode request", err)
		}
	}
	if err := mw.Close(); err != nil {
		return o.fail(ClassOther, "encode request", err)
	}
	req, err := o.newRequest(ctx, http.MethodPost, "/images/edits", &buf, mw.FormDataContentType())
	if err != nil {
		return err
	}
	return o.doJSON(req, out)
}

// extension returns a file extension matching the picture bytes.
func extension(data []byte) string {
	switch http.DetectContentType(data) {
	case "image/jpeg":
		return ".jpg"
	case "image/webp":
		return ".webp"
	case "image/gif":
		return ".gif"
	default:
		return ".png"
	}
}

// fetch downloads a picture the upstream answered with by URL.
func (o *openAI) fetch(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_json", Message: "invalid image URL"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, o.fail(ClassOther, "build request", err)
	}
	resp, err := o.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxImageBody))
	if err != nil {
		return nil, o.fail("", "read image", err)
	}
	return data, nil
}

// chatBody is the JSON of a /chat/completions request.
type chatBody struct {
	Model          string         `json:"model"`
	Messages       any            `json:"messages"`
	MaxTokens      int            `json:"max_tokens,omitempty"`
	Temperature    *float64       `json:"temperature,omitempty"`
	Stream         bool           `json:"stream,omitempty"`
	ResponseFormat map[string]any `json:"response_format,omitempty"`
}

// chatResponse is the JSON of a non-streaming /chat/completions answer.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// body returns the JSON body of a chat request.
func (o *openAI) body(r ChatRequest, messages any, stream bool) chatBody {
	b := chatBody{Model: o.cfg.Model, Messages: messages, MaxTokens: r.MaxTokens, Temperature: r.Temperature, Stream: stream}
	if r.JSON {
		b.ResponseFormat = map[string]any{"type": "json_object"}
	}
	return b
}

// Chat calls /chat/completions without streaming.
func (o *openAI) Chat(ctx context.Context, r ChatRequest) (*ChatResult, error) {
	return o.complete(ctx, o.body(r, r.Messages, false))
}

// complete posts a non-streaming chat body and returns the first choice.
func (o *openAI) complete(ctx context.Context, body chatBody) (*ChatResult, error) {
	if o.cfg.Media != MediaChat {
		return nil, o.fail(ClassCapability, "not a chat upstream", nil)
	}
	var out chatResponse
	if err := o.postJSON(ctx, "/chat/completions", body, &out); err != nil {
		return nil, err
	}
	if len(out.Choices) == 0 {
		return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_json", Message: "no choice in the answer"}
	}
	res := &ChatResult{Content: out.Choices[0].Message.Content}
	if out.Usage != nil {
		res.PromptTokens, res.CompletionTokens = out.Usage.PromptTokens, out.Usage.CompletionTokens
	}
	return res, nil
}

// ChatStream calls /chat/completions with stream=true and passes each delta on in order.
func (o *openAI) ChatStream(ctx context.Context, r ChatRequest, delta func(string) error) (*ChatResult, error) {
	if o.cfg.Media != MediaChat {
		return nil, o.fail(ClassCapability, "not a chat upstream", nil)
	}
	data, err := json.Marshal(o.body(r, r.Messages, true))
	if err != nil {
		return nil, o.fail(ClassOther, "encode request", err)
	}
	req, err := o.newRequest(ctx, http.MethodPost, "/chat/completions", bytes.NewReader(data), "application/json")
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := o.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var content strings.Builder
	res := &ChatResult{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		payload := bytes.TrimSpace(line[5:])
		if string(payload) == "[DONE]" {
			res.Content = content.String()
			return res, nil
		}
		var chunk chatResponse
		if err := json.Unmarshal(payload, &chunk); err != nil {
			return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_json", Message: "invalid stream chunk", Err: err}
		}
		if chunk.Usage != nil {
			res.PromptTokens, res.CompletionTokens = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content == "" {
				continue
			}
			content.WriteString(c.Delta.Content)
			if err := delta(c.Delta.Content); err != nil {
				return nil, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, o.fail("", "read stream", err)
	}
	res.Content = content.String()
	return res, nil
}

// Relay posts a chat/completions body with the upstream's model and returns the raw response.
func (o *openAI) Relay(ctx context.Context, body []byte) (*http.Response, error) {
	if o.cfg.Media != MediaChat {
		return nil, o.fail(ClassCapability, "not a chat upstream", nil)
	}
	out, err := sjson.SetBytes(body, "model", o.cfg.Model)
	if err != nil {
		return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_request", Message: "request body is not a JSON object", Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.cfg.BaseURL+"/chat/completions", bytes.NewReader(out))
	if err != nil {
		return nil, o.fail(ClassOther, "build request", err)
	}
	// The headers of every relayed call, without canonicalising and allocating them each time.
	req.Header["Content-Type"] = jsonContentType
	if o.auth != nil {
		req.Header["Authorization"] = o.auth
	}
	return o.do(req)
}

// ReadImage asks for a description of a picture with an image_url content part.
func (o *openAI) ReadImage(ctx context.Context, r ReadImageRequest) (string, error) {
	mime := r.MIME
	if mime == "" {
		mime = http.DetectContentType(r.Image)
	}
	dataURL := "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(r.Image)
	messages := []map[string]any{
		{"role": "system", "content": r.Instruction},
		{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "Describe this image as instructed. Answer with one JSON object."},
			{"type": "image_url", "image_url": map[string]string{"url": dataURL}},
		}},
	}
	res, err := o.complete(ctx, o.body(ChatRequest{JSON: true}, messages, false))
	if err != nil {
		return "", err
	}
	return res.Content, nil
}

// videoObject is the OpenAI Videos API task shape.
type videoObject struct {
	ID       string  `json:"id"`
	Status   string  `json:"status"`
	Progress float64 `json:"progress"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// task converts the API shape to a VideoTask.
func (v *videoObject) task() *VideoTask {
	t := &VideoTask{ID: v.ID, Status: v.Status, Progress: int(v.Progress)}
	if v.Error != nil {
		t.Error = strings.TrimSpace(v.Error.Code + " " + v.Error.Message)
	}
	if t.Status == VideoCompleted {
		t.Progress = 100
	}
	return t
}

// VideoSize returns the WxH size of a ratio at a resolution (short side 480, 720, 1080, 768 or 1440).
func VideoSize(ratio, resolution string) string {
	short := 720
	switch strings.ToLower(resolution) {
	case "480p":
		short = 480
	case "1080p":
		short = 1080
	case "768p":
		short = 768
	case "2k":
		short = 1440
	}
	w, h := parseRatio(ratio)
	if w == 1 && h == 1 && ratio == "" {
		w, h = 16, 9
	}
	if w >= h {
		return fmt.Sprintf("%dx%d", roundTo(float64(short)*float64(w)/float64(h), 2), short)
	}
	return fmt.Sprintf("%dx%d", short, roundTo(float64(short)*float64(h)/float64(w), 2))
}

// StartVideo calls POST /videos.
func (o *openAI) StartVideo(ctx context.Context, r VideoRequest) (*VideoTask, error) {
	if o.cfg.Media != MediaVideo {
		return nil, o.fail(ClassCapability, "not a video upstream", nil)
	}
	model := o.cfg.Model
	if model == "" {
		model = r.Tier
	}
	body := map[string]any{
		"model":   model,
		"prompt":  r.Prompt,
		"seconds": strconv.Itoa(r.Duration),
		"size":    VideoSize(r.Ratio, r.Resolution),
	}
	if len(r.Images) > 0 {
		body["images"] = r.Images
	}
	if len(r.Videos) > 0 {
		body["videos"] = r.Videos
	}
	if len(r.Audios) > 0 {
		body["audios"] = r.Audios
	}
	if r.GenerateAudio {
		body["generate_audio"] = true
	}
	var out videoObject
	if err := o.postJSON(ctx, "/videos", body, &out); err != nil {
		return nil, err
	}
	if out.ID == "" {
		return nil, &Error{Class: ClassOther, Upstream: o.cfg.Name, Code: "bad_json", Message: "no video id in the answer"}
	}
	return out.task(), nil
}

// VideoStatus calls GET /videos/{id}.
func (o *openAI) VideoStatus(ctx context.Context, id string) (*VideoTask, error) {
	req, err := o.newRequest(ctx, http.MethodGet, "/videos/"+url.PathEscape(id), nil, "")
	if err != nil {
		return nil, err
	}
	var out videoObject
	if err := o.doJSON(req, &out); err != nil {
		return nil, err
	}
	if out.ID == "" {
		out.ID = id
	}
	return out.task(), nil
}

// VideoContent calls GET /videos/{id}/content.
func (o *openAI) VideoContent(ctx context.Context, id string) (io.ReadCloser, error) {
	req, err := o.newRequest(ctx, http.MethodGet, "/videos/"+url.PathEscape(id)+"/content", nil, "")
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "*/*")
	resp, err := o.do(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// CancelVideo calls DELETE /videos/{id}.
func (o *openAI) CancelVideo(ctx context.Context, id string) error {
	req, err := o.newRequest(ctx, http.MethodDelete, "/videos/"+url.PathEscape(id), nil, "")
	if err != nil {
		return err
	}
	resp, err := o.do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return resp.Body.Close()
}

// Probe calls GET /models.
func (o *openAI) Probe(ctx context.Context) error {
	req, err := o.newRequest(ctx, http.MethodGet, "/models", nil, "")
	if err != nil {
		return err
	}
	var out struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := o.doJSON(req, &out); err != nil {
		return err
	}
	return nil
}
