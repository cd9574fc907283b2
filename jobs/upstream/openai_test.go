package upstream_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gabriel-vasile/mimetype"

	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
)

// openAIUpstream returns an openai upstream of media m pointed at the fake server's channel name.
func openAIUpstream(t *testing.T, fake *fakeupstream.Server, name string, m upstream.Media, caps ...upstream.Capability) *upstream.Upstream {
	t.Helper()
	u, err := upstream.New(upstream.Config{
		Name: name, Provider: "alpha", Media: m, Family: "gen2", Protocol: upstream.ProtocolOpenAI,
		BaseURL: fake.ChannelURL(name), APIKey: "sk-test", Model: "model-" + name, Capabilities: caps,
		Tiers: []string{upstream.TierA20Fast}, SoftTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestOpenAIImages(t *testing.T) {
	fake := fakeupstream.New()
	defer fake.Close()
	u := openAIUpstream(t, fake, "img", upstream.MediaImage, upstream.CapQuality, upstream.CapTransparent)
	ctx := context.Background()

	img, err := u.Image().GenerateImage(ctx, upstream.ImageRequest{Prompt: "cat", Ratio: "3:4", Quality: "high", Background: "transparent"})
	if err != nil {
		t.Fatalf("generations: %v", err)
	}
	if img.MIME != "image/png" || mimetype.Detect(img.Data).String() != "image/png" {
		t.Errorf("got %s, want a PNG", img.MIME)
	}
	last := fake.LastRequest("/v1/images/generations")
	for _, want := range []string{`"model":"model-img"`, `"size":"1024x1536"`, `"quality":"high"`, `"background":"transparent"`, `"output_format":"png"`, `"n":1`} {
		if !strings.Contains(string(last.Body), want) {
			t.Errorf("request body %s lacks %s", last.Body, want)
		}
	}
	if got := last.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization: got %q", got)
	}

	ref := fakeupstream.PNG("ref")
	if _, err := u.Image().GenerateImage(ctx, upstream.ImageRequest{Prompt: "cat", ReferenceImages: [][]byte{ref, ref, ref}}); err != nil {
		t.Fatalf("edits: %v", err)
	}
	edit := fake.LastRequest("/v1/images/edits")
	if edit.Images != 3 || edit.Mask || edit.Fields["prompt"] != "cat" || edit.Fields["model"] != "model-img" {
		t.Errorf("edits: got %d image[] parts, mask %v, fields %v", edit.Images, edit.Mask, edit.Fields)
	}
	if _, err := u.Image().GenerateImage(ctx, upstream.ImageRequest{Prompt: "cat", Image: ref, Mask: ref}); err != nil {
		t.Fatalf("inpainting: %v", err)
	}
	if edit := fake.LastRequest("/v1/images/edits"); edit.Images != 1 || !edit.Mask {
		t.Errorf("inpainting: got %d image[] parts and mask %v", edit.Images, edit.Mask)
	}
}

func TestImageSize(t *testing.T) {
	tests := []struct{ ratio, res, want string }{
		{"1:1", "", "1024x1024"}, {"3:4", "1k", "1024x1536"}, {"16:9", "", "1536x1024"},
		{"1:1", "2k", "2048x2048"}, {"3:4", "2k", "1536x2048"}, {"16:9", "4k", "4096x2304"},
	}
	for _, tt := range tests {
		if got := upstream.ImageSize(tt.ratio, tt.res); got != tt.want {
			t.Errorf("ImageSize(%q, %q) = %s, want %s", tt.ratio, tt.res, got, tt.want)
		}
	}
	if got := upstream.VideoSize("16:9", "720p"); got != "1280x720" {
		t.Errorf("VideoSize = %s, want 1280x720", got)
	}
	if got := upstream.VideoSize("9:16", "1080p"); got != "1080x1920" {
		t.Errorf("VideoSize = %s, want 1080x1920", got)
	}
}

func TestOpenAIErrorClasses(t *testing.T) {
	fake := fakeupstream.New()
	defer fake.Close()
	u := openAIUpstream(t, fake, "img", upstream.MediaImage)
	tests := []struct {
		mode fakeupstream.Mode
		want upstream.Class
	}{
		{fakeupstream.RateLimit, upstream.ClassTransient},
		{fakeupstream.Quota, upstream.ClassUnpaid},
		{fakeupstream.Unauthorized, upstream.ClassRevoked},
		{fakeupstream.ServerError, upstream.ClassOther},
		{fakeupstream.BadJSON, upstream.ClassOther},
	}
	for _, tt := range tests {
		fake.SetChannelFault("img", fakeupstream.Fault{Mode: tt.mode})
		_, err := u.Image().GenerateImage(context.Background(), upstream.ImageRequest{Prompt: "x"})
		if got := upstream.ClassOf(err); got != tt.want {
			t.Errorf("mode %d: got class %q (%v), want %q", tt.mode, got, err, tt.want)
		}
		var ue *upstream.Error
		if !errors.As(err, &ue) {
			t.Fatalf("mode %d: got %T, want *upstream.Error", tt.mode, err)
		}
		if safe := ue.SafeMessage(); strings.Contains(safe, "img") || strings.Contains(safe, "alpha") || strings.Contains(safe, "quota") {
			t.Errorf("SafeMessage %q leaks details", safe)
		}
	}
	fake.SetChannelFault("img", fakeupstream.Fault{Mode: fakeupstream.Hang})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := u.Image().GenerateImage(ctx, upstream.ImageRequest{Prompt: "x"})
	if upstream.ClassOf(err) != upstream.ClassTransient {
		t.Errorf("hang: got %v, want a transient time-out", err)
	}

	classify := []struct {
		status int
		body   string
		want   upstream.Class
	}{
		{402, `{}`, upstream.ClassUnpaid},
		{403, `{"error":{"message":"forbidden"}}`, upstream.ClassRevoked},
		{408, ``, upstream.ClassTransient},
		{429, `{"error":{"message":"slow down","type":"tokens"}}`, upstream.ClassTransient},
		{429, `{"error":{"message":"quota","type":"insufficient_quota","code":null}}`, upstream.ClassUnpaid},
		{400, `{"error":{"message":"background is not supported by this model","code":"unsupported_parameter"}}`, upstream.ClassCapability},
		{400, `{"error":{"message":"prompt too long","code":"invalid_value"}}`, upstream.ClassOther},
		{502, `bad gateway`, upstream.ClassOther},
		{503, ``, upstream.ClassOther},
	}
	for _, c := range classify {
		if got := upstream.ClassifyHTTP("x", c.status, []byte(c.body)).Class; got != c.want {
			t.Errorf("ClassifyHTTP(%d, %s) = %q, want %q", c.status, c.body, got, c.want)
		}
	}
}

func TestOpenAIChat(t *testing.T) {
	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetStream(6, time.Millisecond)
	u := openAIUpstream(t, fake, "chat", upstream.MediaChat)
	ctx := context.Background()
	msgs := []upstream.Message{{Role: "user", Content: "hi"}}

	res, err := u.Chat().Chat(ctx, upstream.ChatRequest{Messages: msgs})
	if err != nil || res.Content != "fake reply" || res.PromptTokens != 10 {
		t.Errorf("Chat: got %+v, %v", res, err)
	}
	var got []string
	res, err = u.Chat().ChatStream(ctx, upstream.ChatRequest{Messages: msgs}, func(s string) error {
		got = append(got, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"chunk-0 ", "chunk-1 ", "chunk-2 ", "chunk-3 ", "chunk-4 ", "chunk-5 "}
	if strings.Join(got, "|") != strings.Join(want, "|") || res.Content != strings.Join(want, "") {
		t.Errorf("stream: got %q, want %q in order", got, want)
	}

	text, err := u.Chat().ReadImage(ctx, upstream.ReadImageRequest{Image: fakeupstream.PNG("x"), Instruction: "describe"})
	if err != nil || !strings.HasPrefix(text, "{") {
		t.Errorf("ReadImage: got %q, %v", text, err)
	}
	body := string(fake.LastRequest("/v1/chat/completions").Body)
	if !strings.Contains(body, `"type":"image_url"`) || !strings.Contains(body, "data:image/png;base64,") {
		t.Errorf("ReadImage request lacks the image_url part: %.200s", body)
	}

	fake.SetChannelFault("chat", fakeupstream.Fault{Mode: fakeupstream.BadJSON})
	if _, err := u.Chat().Chat(ctx, upstream.ChatRequest{Messages: msgs}); upstream.ClassOf(err) != upstream.ClassOther {
		t.Errorf("bad JSON: got %v, want class other", err)
	}
}

func TestOpenAIRelayPassesStreamThrough(t *testing.T) {
	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetStream(4, 5*time.Millisecond)
	u := openAIUpstream(t, fake, "chat", upstream.MediaChat)
	resp, err := u.Chat().Relay(context.Background(), []byte(`{"model":"service-auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.Contains(string(fake.LastRequest("/v1/chat/completions").Body), `"model":"model-chat"`) {
		t.Error("the relayed body does not carry the upstream's model")
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type: got %q", ct)
	}
	var contents []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, `"content":"`); i >= 0 {
			rest := line[i+len(`"content":"`):]
			contents = append(contents, rest[:strings.Index(rest, `"`)])
		}
	}
	if strings.Join(contents, "") != "chunk-0 chunk-1 chunk-2 chunk-3 " {
		t.Errorf("got chunks %q, want chunk-0..3 in order", contents)
	}

	fake.SetChannelFault("chat", fakeupstream.Fault{Mode: fakeupstream.Unauthorized})
	if _, err := u.Chat().Relay(context.Background(), []byte(`{"messages":[]}`)); upstream.ClassOf(err) != upstream.ClassRevoked {
		t.Errorf("relay 401: got %v, want revoked", err)
	}
}

func TestOpenAIVideoAndProbe(t *testing.T) {
	fake := fakeupstream.New()
	defer fake.Close()
	fake.SetVideoPolls(2)
	u := openAIUpstream(t, fake, "vid", upstream.MediaVideo)
	ctx := context.Background()
	task, err := u.Video().StartVideo(ctx, upstream.VideoRequest{Prompt: "sea", Tier: upstream.TierA20Fast, Ratio: "16:9", Resolution: "720p", Duration: 5, GenerateAudio: true})
	if err != nil || task.ID == "" || task.Status != upstream.VideoQueued {
		t.Fatalf("StartVideo: got %+v, %v", task, err)
	}
	body := string(fake.LastRequest("/v1/videos").Body)
	for _, want := range []string{`"seconds":"5"`, `"size":"1280x720"`, `"generate_audio":true`, `"model":"model-vid"`} {
		if !strings.Contains(body, want) {
			t.Errorf("video request %s lacks %s", body, want)
		}
	}
	if st, _ := u.Video().VideoStatus(ctx, task.ID); st.Status != upstream.VideoInProgress || st.Progress != 50 {
		t.Errorf("first poll: got %+v", st)
	}
	if st, _ := u.Video().VideoStatus(ctx, task.ID); st.Status != upstream.VideoCompleted || st.Progress != 100 {
		t.Errorf("second poll: got %+v", st)
	}
	rc, err := u.Video().VideoContent(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if !mimetype.Detect(data).Is("video/mp4") {
		t.Errorf("content detected as %s", mimetype.Detect(data))
	}
	if err := u.Video().CancelVideo(ctx, task.ID); err != nil {
		t.Errorf("CancelVideo: %v", err)
	}
	if _, err := u.Video().VideoStatus(ctx, task.ID); upstream.ClassOf(err) != upstream.ClassCapability {
		t.Errorf("status after delete: got %v", err)
	}
	// Two polls, the DELETE and the poll after it share the path pattern.
	if fake.Count("/v1/videos/{id}") != 4 || fake.ChannelCount("vid", "/v1/videos") != 1 {
		t.Errorf("counts: got %d status and %d create requests", fake.Count("/v1/videos/{id}"), fake.ChannelCount("vid", "/v1/videos"))
	}

	if err := u.Probe(ctx); err != nil {
		t.Errorf("Probe: %v", err)
	}
	fake.SetChannelFault("vid", fakeupstream.Fault{Mode: fakeupstream.Unauthorized, Times: 1})
	if err := u.Probe(ctx); upstream.ClassOf(err) != upstream.ClassRevoked {
		t.Errorf("Probe with 401: got %v", err)
	}
	if err := u.Probe(ctx); err != nil {
		t.Errorf("Probe after the one-off fault: %v", err)
	}
}
