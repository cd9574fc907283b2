package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gabriel-vasile/mimetype"
)

// builtinUpstream returns a builtin upstream of media m with every capability of that media but mask.
func builtinUpstream(t *testing.T, m Media) *Upstream {
	t.Helper()
	cfg := Config{Name: "b-" + string(m), Provider: "local", Media: m, Family: "f", Protocol: ProtocolBuiltin, Model: "b"}
	for _, c := range mediaCapabilities[m] {
		if c != CapMask {
			cfg.Capabilities = append(cfg.Capabilities, c)
		}
	}
	if m == MediaVideo {
		cfg.Tiers = TierCodes
	}
	u, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestBuiltinImageFormatAndSize(t *testing.T) {
	u := builtinUpstream(t, MediaImage)
	tests := []struct {
		ratio, resolution, background string
		w, h                          int
		mime                          string
	}{
		{"1:1", "", "", 1024, 1024, "image/jpeg"},
		{"3:4", "1k", "", 768, 1024, "image/jpeg"},
		{"16:9", "", "transparent", 1024, 576, "image/png"},
		{"9:16", "2k", "opaque", 1152, 2048, "image/jpeg"},
		{"4:3", "4k", "transparent", 2048, 1536, "image/png"},
		{"nonsense", "", "", 1024, 1024, "image/jpeg"},
	}
	for _, tt := range tests {
		t.Run(tt.ratio+"/"+tt.resolution+"/"+tt.background, func(t *testing.T) {
			img, err := u.Image().GenerateImage(context.Background(), ImageRequest{Prompt: "a red fox", Ratio: tt.ratio, Resolution: tt.resolution, Background: tt.background})
			if err != nil {
				t.Fatalf("GenerateImage: %v", err)
			}
			if img.MIME != tt.mime || mimetype.Detect(img.Data).String() != tt.mime {
				t.Fatalf("got %s (detected %s), want %s", img.MIME, mimetype.Detect(img.Data), tt.mime)
			}
			cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Width != tt.w || cfg.Height != tt.h {
				t.Errorf("got %dx%d, want %dx%d", cfg.Width, cfg.Height, tt.w, tt.h)
			}
		})
	}
}

func TestBuiltinImageTransparentHasAlpha(t *testing.T) {
	u := builtinUpstream(t, MediaImage)
	img, err := u.Image().GenerateImage(context.Background(), ImageRequest{Prompt: "logo", Ratio: "1:1", Background: "transparent"})
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := png.Decode(bytes.NewReader(img.Data))
	if err != nil {
		t.Fatal(err)
	}
	var clear, solid int
	b := decoded.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 8 {
		for x := b.Min.X; x < b.Max.X; x += 8 {
			if _, _, _, a := decoded.At(x, y).RGBA(); a == 0 {
				clear++
			} else {
				solid++
			}
		}
	}
	if clear == 0 || solid == 0 {
		t.Errorf("got %d transparent and %d painted samples, want both", clear, solid)
	}
	if _, ok := decoded.(*image.NRGBA); !ok {
		t.Errorf("got %T, want an NRGBA (alpha) PNG", decoded)
	}
}

func TestBuiltinImageDeterministicAndReferences(t *testing.T) {
	u := builtinUpstream(t, MediaImage)
	gen := func(r ImageRequest) []byte {
		t.Helper()
		img, err := u.Image().GenerateImage(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return img.Data
	}
	base := ImageRequest{Prompt: "a lighthouse at dusk", Ratio: "3:4"}
	a, b := gen(base), gen(base)
	if !bytes.Equal(a, b) {
		t.Error("same prompt and parameters gave different bytes")
	}
	other := base
	other.Prompt = "a lighthouse at dawn"
	if bytes.Equal(a, gen(other)) {
		t.Error("different prompts gave the same bytes")
	}
	ref := solidPNG(t, color.NRGBA{0, 255, 0, 255})
	withRef := base
	withRef.ReferenceImages = [][]byte{ref}
	c := gen(withRef)
	if bytes.Equal(a, c) {
		t.Error("a reference image did not change the output")
	}
	if !bytes.Equal(c, gen(withRef)) {
		t.Error("same references gave different bytes")
	}
	// The blend pulls the picture towards the reference colour.
	if greenShare(t, c) <= greenShare(t, a) {
		t.Error("blending a green reference did not make the picture greener")
	}
	undecodable := base
	undecodable.ReferenceImages = [][]byte{[]byte("not an image")}
	if _, err := u.Image().GenerateImage(context.Background(), undecodable); err != nil {
		t.Errorf("an undecodable reference failed the call: %v", err)
	}
}

func solidPNG(t *testing.T, c color.NRGBA) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 32, 48))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func greenShare(t *testing.T, data []byte) float64 {
	t.Helper()
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var g, all float64
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 16 {
		for x := b.Min.X; x < b.Max.X; x += 16 {
			r, gg, bb, _ := img.At(x, y).RGBA()
			g += float64(gg)
			all += float64(r + gg + bb)
		}
	}
	return g / all
}

func TestBuiltinImageRejectsMask(t *testing.T) {
	u := builtinUpstream(t, MediaImage)
	_, err := u.Image().GenerateImage(context.Background(), ImageRequest{Prompt: "x", Image: solidPNG(t, color.NRGBA{A: 255}), Mask: solidPNG(t, color.NRGBA{255, 255, 255, 255})})
	if ClassOf(err) != ClassCapability {
		t.Errorf("got %v, want a capability error", err)
	}
}

func TestBuiltinLatency(t *testing.T) {
	cfg := Config{Name: "slow", Media: MediaChat, Protocol: ProtocolBuiltin, Latency: 200 * time.Millisecond}
	u, _ := New(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := u.Chat().Chat(ctx, ChatRequest{Messages: []Message{{Role: "user", Content: "hi"}}})
	if ClassOf(err) != ClassTransient || time.Since(start) > 150*time.Millisecond {
		t.Errorf("got %v after %v, want a transient error as soon as the context ends", err, time.Since(start))
	}
}

func TestBuiltinChat(t *testing.T) {
	u := builtinUpstream(t, MediaChat)
	ctx := context.Background()
	ask := func(system, user string) string {
		t.Helper()
		res, err := u.Chat().Chat(ctx, ChatRequest{Messages: []Message{{Role: "system", Content: system}, {Role: "user", Content: user}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content
	}
	plain := ask("You are a helpful assistant.", "Tell me about autumn leaves in Kyoto")
	if plain == "" || strings.HasPrefix(plain, "{") {
		t.Errorf("plain chat: got %q, want plain text", plain)
	}
	if plain != ask("You are a helpful assistant.", "Tell me about autumn leaves in Kyoto") {
		t.Error("the same prompt gave different answers")
	}
	answer := ask("Write xiaohongshu copy. Answer with a JSON object with title, body and hashtags.", "秋天的京都红叶")
	var c struct {
		Title    string   `json:"title"`
		Body     string   `json:"body"`
		Hashtags []string `json:"hashtags"`
	}
	if err := json.Unmarshal([]byte(answer), &c); err != nil {
		t.Fatalf("JSON copy: got %q: %v", answer, err)
	}
	if c.Title == "" || c.Body == "" || len(c.Hashtags) == 0 {
		t.Errorf("JSON copy: got %+v, want title, body and hashtags", c)
	}

	var pieces []string
	res, err := u.Chat().ChatStream(ctx, ChatRequest{Messages: []Message{{Role: "user", Content: "a long enough question to split"}}}, func(s string) error {
		pieces = append(pieces, s)
		return nil
	})
	if err != nil || len(pieces) < 2 || strings.Join(pieces, "") != res.Content {
		t.Errorf("stream: got %d pieces %q for %q (%v)", len(pieces), pieces, res.Content, err)
	}
}

func TestBuiltinRelay(t *testing.T) {
	u := builtinUpstream(t, MediaChat)
	ctx := context.Background()
	resp, err := u.Chat().Relay(ctx, []byte(`{"model":"service-auto","messages":[{"role":"user","content":[{"type":"text","text":"hello there"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message Message `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Object != "chat.completion" || len(out.Choices) != 1 || out.Choices[0].Message.Content == "" {
		t.Errorf("got %+v (%v), want one chat.completion choice", out, err)
	}
	resp.Body.Close()

	resp, err = u.Chat().Relay(ctx, []byte(`{"model":"service-auto","stream":true,"messages":[{"role":"user","content":"hello there"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type: got %q", ct)
	}
	var events int
	var last string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events++
			last = line
		}
	}
	if events < 3 || last != "[DONE]" {
		t.Errorf("got %d events ending %q, want several ending [DONE]", events, last)
	}
	if _, err := u.Chat().Relay(ctx, []byte("{oops")); ClassOf(err) != ClassOther {
		t.Errorf("invalid body: got %v, want class other", err)
	}
}

func TestBuiltinReadImage(t *testing.T) {
	u := builtinUpstream(t, MediaChat)
	img := image.NewNRGBA(image.Rect(0, 0, 300, 400))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = 200, 30, 30, 255
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	text, err := u.Chat().ReadImage(context.Background(), ReadImageRequest{Image: buf.Bytes(), MIME: "image/jpeg"})
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(text), &d); err != nil {
		t.Fatalf("got %q: %v", text, err)
	}
	for _, key := range []string{"sculpt", "prompt", "prompt_cn", "style_tags", "aspect_ratio", "zh_name", "description", "genre", "ratio", "body_md"} {
		if _, ok := d[key]; !ok {
			t.Errorf("missing field %s", key)
		}
	}
	if len(d) != 10 {
		t.Errorf("got %d fields, want exactly the 10 of spec 4.7", len(d))
	}
	sculpt, _ := d["sculpt"].(map[string]any)
	for _, key := range []string{"subject", "composition", "universe", "light", "print", "texture"} {
		if s, _ := sculpt[key].(string); s == "" {
			t.Errorf("sculpt.%s is empty", key)
		}
	}
	if d["aspect_ratio"] != "3:4" || d["ratio"] != "3:4" {
		t.Errorf("ratio: got %v/%v, want 3:4", d["aspect_ratio"], d["ratio"])
	}
	if !strings.Contains(d["description"].(string), "red") || !strings.Contains(d["description"].(string), "300x400") {
		t.Errorf("description %q does not reflect the picture", d["description"])
	}
	// A lossless WebP header of 640x480: the size is read even without a WebP decoder.
	webp := append([]byte("RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f"), 0x7f, 0xc2, 0x77, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00)
	text, err = u.Chat().ReadImage(context.Background(), ReadImageRequest{Image: webp, MIME: "image/webp"})
	if err != nil || !strings.Contains(text, "640x480") || !strings.Contains(text, `"ratio":"4:3"`) {
		t.Errorf("WebP: got %s, %v", text, err)
	}
	if _, err := u.Chat().ReadImage(context.Background(), ReadImageRequest{Image: []byte("nope")}); err == nil {
		t.Error("an undecodable picture was read")
	}
}

func TestBuiltinVideo(t *testing.T) {
	cfg := Config{Name: "v", Media: MediaVideo, Protocol: ProtocolBuiltin, Tiers: TierCodes, Latency: 40 * time.Millisecond}
	u, _ := New(cfg)
	ctx := context.Background()
	task, err := u.Video().StartVideo(ctx, VideoRequest{Prompt: "waves", Tier: TierA20Fast, Ratio: "16:9", Resolution: "720p", Duration: 5})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status == VideoCompleted {
		t.Errorf("got a completed task at once despite the latency")
	}
	if _, err := u.Video().VideoContent(ctx, task.ID); err == nil {
		t.Error("content of an unfinished video was returned")
	}
	time.Sleep(50 * time.Millisecond)
	task, err = u.Video().VideoStatus(ctx, task.ID)
	if err != nil || task.Status != VideoCompleted || task.Progress != 100 {
		t.Fatalf("got %+v, %v; want completed", task, err)
	}
	rc, err := u.Video().VideoContent(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if m := mimetype.Detect(data); !m.Is("video/mp4") {
		t.Errorf("detected %s, want video/mp4", m)
	}
	if len(data) > 200<<10 {
		t.Errorf("video is %d bytes, want a small file", len(data))
	}
	if !bytes.Contains(data, []byte("jpeg")) || !bytes.Contains(data, []byte("moov")) || !bytes.Contains(data, []byte("mdat")) {
		t.Error("the file lacks the MJPEG sample entry, moov or mdat box")
	}
	if again, _ := RenderVideo("waves", "16:9", 5); !bytes.Equal(again, data) {
		t.Error("the same prompt gave a different video")
	}

	// A new adapter (a restart) still knows the task from its id.
	restarted, _ := New(cfg)
	if st, err := restarted.Video().VideoStatus(ctx, task.ID); err != nil || st.Status != VideoCompleted {
		t.Errorf("after a restart got %+v, %v", st, err)
	}
	if err := restarted.Video().CancelVideo(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if st, _ := restarted.Video().VideoStatus(ctx, task.ID); st.Status != VideoFailed {
		t.Errorf("after cancel got %+v, want failed", st)
	}
	if _, err := u.Video().VideoStatus(ctx, "garbage"); err == nil {
		t.Error("an unknown id was accepted")
	}
	if _, err := u.Image().GenerateImage(ctx, ImageRequest{}); ClassOf(err) != ClassCapability {
		t.Errorf("image call on a video upstream: got %v, want a capability error", err)
	}
}

// TestMP4Boxes checks the box layout: sizes add up and stco points at the first frame.
func TestMP4Boxes(t *testing.T) {
	frames := [][]byte{[]byte("\xff\xd8frame-one\xff\xd9"), []byte("\xff\xd8frame-two\xff\xd9")}
	data := writeMJPEGMP4(frames, 32, 16, 500)
	var types []string
	for off := 0; off < len(data); {
		size := int(uint32(data[off])<<24 | uint32(data[off+1])<<16 | uint32(data[off+2])<<8 | uint32(data[off+3]))
		if size < 8 || off+size > len(data) {
			t.Fatalf("bad box size %d at %d", size, off)
		}
		types = append(types, string(data[off+4:off+8]))
		off += size
	}
	if strings.Join(types, ",") != "ftyp,moov,mdat" {
		t.Fatalf("top-level boxes: got %v", types)
	}
	i := bytes.Index(data, []byte("stco"))
	off := int(uint32(data[i+12])<<24 | uint32(data[i+13])<<16 | uint32(data[i+14])<<8 | uint32(data[i+15]))
	if !bytes.HasPrefix(data[off:], frames[0]) {
		t.Errorf("stco offset %d does not point at the first frame", off)
	}
}
