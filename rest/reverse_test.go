package rest_test

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
	"studio/models"
)

// builtinVision is a local chat upstream that reads pictures (it answers the fields of spec 4.7).
func builtinVision(name string) upstream.Config {
	return upstream.Config{Name: name, Provider: "prov-" + name, Media: upstream.MediaChat, Family: "chat", Protocol: upstream.ProtocolBuiltin,
		Model: "model-" + name, Capabilities: []upstream.Capability{upstream.CapVision}, SoftTimeout: 5 * time.Second, Rating: 0.5}
}

// readingJPEG returns a small real JPEG picture.
func readingJPEG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 48, 64))
	for y := 0; y < 64; y++ {
		for x := 0; x < 48; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 5), uint8(y * 4), 90, 255})
		}
	}
	var buf bytes.Buffer
	_ = jpeg.Encode(&buf, img, nil)
	return buf.Bytes()
}

// readingGIF is the smallest GIF picture.
var readingGIF = []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

// pictureServer serves pictures by path.
func pictureServer(t *testing.T, files map[string][]byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// readingMultipart builds a multipart body: fields first, then the file part when file is not nil.
func readingMultipart(fields map[string]string, file []byte) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	if file != nil {
		w, _ := mw.CreateFormFile("file", "picture.bin")
		_, _ = w.Write(file)
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// reverseMultipart posts a multipart image reading.
func (e *env) reverseMultipart(key, query string, fields map[string]string, file []byte) *resp {
	e.t.Helper()
	body, ct := readingMultipart(fields, file)
	return e.callH("POST", "/api/reverse"+query, map[string]string{"X-API-Key": key, "Content-Type": ct}, body)
}

// readingKeys are the fields of spec 4.7, sorted.
var readingKeys = []string{"aspect_ratio", "body_md", "description", "genre", "ok", "prompt", "prompt_cn", "ratio", "sculpt", "style_tags", "zh_name"}

// sortedKeys returns the keys of a JSON object, sorted.
func sortedKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestReverseAnswersExactlyTheFieldsOfTheSpec(t *testing.T) {
	e := newEnv(t, withUpstreams(builtinVision("vision-a")))
	_, key := e.tenant("Acme", 5)
	base := pictureServer(t, map[string][]byte{"/p.png": fakeupstream.PNG("reverse"), "/p.jpg": readingJPEG()})
	answers := map[string]*resp{
		"json png":       e.call("POST", "/api/reverse", key, map[string]any{"image_url": base + "/p.png"}).expect(t, 200),
		"json jpg":       e.call("POST", "/api/reverse", key, map[string]any{"image_url": base + "/p.jpg"}).expect(t, 200),
		"multipart png":  e.reverseMultipart(key, "", nil, fakeupstream.PNG("reverse")).expect(t, 200),
		"multipart jpeg": e.reverseMultipart(key, "", nil, readingJPEG()).expect(t, 200),
	}
	for name, r := range answers {
		if got := sortedKeys(r.JSON); !slices.Equal(got, readingKeys) {
			t.Errorf("%s: keys %v, want exactly %v", name, got, readingKeys)
		}
		sculpt, _ := r.JSON["sculpt"].(map[string]any)
		if got := sortedKeys(sculpt); !slices.Equal(got, []string{"composition", "light", "print", "subject", "texture", "universe"}) {
			t.Errorf("%s: sculpt keys %v", name, got)
		}
		if r.JSON["ok"] != true || r.str("prompt") == "" || r.str("aspect_ratio") == "" {
			t.Errorf("%s: reading = %s", name, r.Body)
		}
		if _, ok := r.JSON["style_tags"].([]any); !ok {
			t.Errorf("%s: style_tags = %v, want an array", name, r.JSON["style_tags"])
		}
		leaks(t, r.Body, "vision-a")
	}
	if r := answers["json jpg"]; r.str("ratio") != "3:4" {
		t.Errorf("ratio of a 48x64 picture = %q, want 3:4", r.str("ratio"))
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 1 {
		t.Fatalf("credits = %v after 4 readings from 5, want 1 (1 credit each)", b.num("credits"))
	}
	if today := e.usageToday(key); today["reverse"] != 4.0 {
		t.Fatalf("usage today = %v, want 4 readings", today)
	}
}

func TestReverseRefusesEverythingButOneInput(t *testing.T) {
	e := newEnv(t, withUpstreams(builtinVision("vision-a")))
	_, key := e.tenant("Acme", 5)
	base := pictureServer(t, map[string][]byte{"/p.png": fakeupstream.PNG("x"), "/p.gif": readingGIF,
		"/big.png": append(fakeupstream.PNG("x"), make([]byte, 6<<20)...)})
	png := fakeupstream.PNG("x")
	postJSON := func(query string, body map[string]any) func() *resp {
		return func() *resp { return e.call("POST", "/api/reverse"+query, key, body) }
	}
	postFile := func(fields map[string]string, file []byte) func() *resp {
		return func() *resp { return e.reverseMultipart(key, "", fields, file) }
	}
	type reverseCase struct {
		name   string
		call   func() *resp
		status int
		msg    string
	}
	cases := []reverseCase{
		{"empty JSON", postJSON("", map[string]any{}), 400, "image_url is required"},
		{"no body", func() *resp { return e.call("POST", "/api/reverse", key, nil) }, 400, "empty"},
		{"multipart without file", postFile(nil, nil), 400, "file is required"},
		{"multipart with file and image_url", postFile(map[string]string{"image_url": base + "/p.png"}, png), 400, "exactly one"},
		{"JSON with file", postJSON("", map[string]any{"image_url": base + "/p.png", "file": "x"}), 400, "exactly one"},
		{"JSON with another parameter", postJSON("", map[string]any{"image_url": base + "/p.png", "lang": "en"}), 400, "no other parameters"},
		{"multipart with another parameter", postFile(map[string]string{"lang": "en"}, png), 400, "no other parameters"},
		{"query parameter", postJSON("?lang=en", map[string]any{"image_url": base + "/p.png"}), 400, "no other parameters"},
		{"image_url not a string", postJSON("", map[string]any{"image_url": 3}), 400, "image_url"},
		{"gif file", postFile(nil, readingGIF), 400, "png, jpg or webp"},
		{"gif URL", postJSON("", map[string]any{"image_url": base + "/p.gif"}), 400, "png, jpg or webp"},
		{"text file", postFile(nil, []byte("hello, world")), 400, "png, jpg or webp"},
		{"file over 6 MB", postFile(nil, append(fakeupstream.PNG("x"), make([]byte, 6<<20)...)), 413, "6 MB"},
		{"URL over 6 MB", postJSON("", map[string]any{"image_url": base + "/big.png"}), 400, "6 MB"},
		{"URL not found", postJSON("", map[string]any{"image_url": base + "/none.png"}), 400, "could not be read"},
		{"not a URL", postJSON("", map[string]any{"image_url": "ftp://x/y.png"}), 400, "image_url"},
	}
	for _, p := range models.ReverseRemovedParams {
		msg := p + " is no longer accepted"
		cases = append(cases,
			reverseCase{"removed " + p + " in JSON", postJSON("", map[string]any{"image_url": base + "/p.png", p: true}), 400, msg},
			reverseCase{"removed " + p + " in multipart", postFile(map[string]string{p: "1"}, png), 400, msg},
			reverseCase{"removed " + p + " in the query", postJSON("?"+p+"=1", map[string]any{"image_url": base + "/p.png"}), 400, msg},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.call()
			if r.Status != c.status || !strings.Contains(r.str("error"), c.msg) {
				t.Fatalf("got %d %s, want %d containing %q", r.Status, r.Body, c.status, c.msg)
			}
		})
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 5 {
		t.Fatalf("credits = %v after refused readings, want 5 (nothing charged)", b.num("credits"))
	}
	e.call("POST", "/api/reverse", e.adminKey, map[string]any{"image_url": base + "/p.png"}).expect(t, 403)
}

func TestReverseRefundsAFailedReadingOnce(t *testing.T) {
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	// The fake chat upstream answers a reading with copy, not the fields of 4.7: an unusable answer.
	e := newEnv(t, withUpstreams(chatChannel("chat-a", fake.ChannelURL("chat-a"), upstream.CapVision)))
	tenantID, key := e.tenant("Acme", 3)
	png := fakeupstream.PNG("x")
	r := e.reverseMultipart(key, "", nil, png).expect(t, 503)
	if !strings.Contains(r.str("error"), "refunded") {
		t.Fatalf("error = %q, want it to say the credit was refunded", r.str("error"))
	}
	leaks(t, r.Body)
	fake.SetChannelFault("chat-a", fakeupstream.Fault{Mode: fakeupstream.ServerError})
	e.reverseMultipart(key, "", nil, png).expect(t, 503)
	if n := fake.ChannelCount("chat-a", "/v1/chat/completions"); n < 2 {
		t.Fatalf("the upstream saw %d readings, want 2", n)
	}
	if b := e.call("GET", "/api/balance", key, nil); b.num("credits") != 3 {
		t.Fatalf("credits = %v after two failed readings, want 3 (refunded)", b.num("credits"))
	}
	var entries []models.LedgerEntry
	e.app.DB.Gorm.Where("tenant_id = ? AND ref LIKE ?", tenantID, "reverse:%").Order("id").Find(&entries)
	refs := map[string][]string{}
	for _, en := range entries {
		refs[en.Ref] = append(refs[en.Ref], en.Kind)
	}
	if len(refs) != 2 {
		t.Fatalf("ledger refs = %v, want two readings", refs)
	}
	for ref, kinds := range refs {
		if !slices.Equal(kinds, []string{models.LedgerCharge, models.LedgerRefund}) {
			t.Fatalf("ledger of %s = %v, want one charge and one refund", ref, kinds)
		}
	}
	if problems, err := e.app.Credits().AuditLedger(t.Context()); err != nil || len(problems) > 0 {
		t.Fatalf("ledger audit: %v %v", problems, err)
	}
}

func TestReverseNeedsCreditsAndAVisionUpstream(t *testing.T) {
	e := newEnv(t, withUpstreams(builtinVision("vision-a")))
	_, key := e.tenant("Acme", 0)
	r := e.reverseMultipart(key, "", nil, fakeupstream.PNG("x")).expect(t, 402)
	if !strings.Contains(r.str("error"), "missing 1") {
		t.Fatalf("error = %q", r.str("error"))
	}
	plain := upstream.Config{Name: "chat-plain", Provider: "local", Media: upstream.MediaChat, Family: "chat", Protocol: upstream.ProtocolBuiltin,
		Model: "m", SoftTimeout: time.Second, Rating: 0.5}
	e2 := newEnv(t, withUpstreams(plain))
	_, key2 := e2.tenant("Acme", 2)
	r = e2.reverseMultipart(key2, "", nil, fakeupstream.PNG("x")).expect(t, 400)
	if r.str("error") != models.NoUpstreamMessage {
		t.Fatalf("error = %q, want %s", r.str("error"), models.NoUpstreamMessage)
	}
	if b := e2.call("GET", "/api/balance", key2, nil); b.num("credits") != 2 {
		t.Fatalf("credits = %v, want 2 (refused before any charge)", b.num("credits"))
	}
}

func TestReverseReadsThisServicesUploads(t *testing.T) {
	e := newEnv(t, withUpstreams(builtinVision("vision-a")))
	_, key := e.tenant("Acme", 1)
	body, ct := readingMultipart(nil, readingJPEG())
	up := e.callH("POST", "/api/upload-ref", map[string]string{"X-API-Key": key, "Content-Type": ct}, body).expect(t, 200)
	r := e.call("POST", "/api/reverse", key, map[string]any{"image_url": up.str("url")}).expect(t, 200)
	var reading models.Reading
	if err := json.Unmarshal(r.Body, &reading); err != nil || reading.Ratio != "3:4" {
		t.Fatalf("reading of an upload = %s (%v)", r.Body, err)
	}
}
