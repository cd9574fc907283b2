package rest_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"studio/cmd/server"
	"studio/jobs"
	"studio/models"
	"studio/models/media"
	"studio/models/media/s3test"
	"studio/models/modelstest"
)

// ---- sample files of every accepted format (as models/media's samples_test.go builds them) ----

func sampleImage() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 16, 12))
	for y := range 12 {
		for x := range 16 {
			img.Set(x, y, color.RGBA{uint8(x * 16), uint8(y * 20), 128, 255})
		}
	}
	return img
}

func samplePNG() []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, sampleImage()); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func sampleJPEG() []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, sampleImage(), &jpeg.Options{Quality: 80}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func sampleGIF() []byte {
	var b bytes.Buffer
	if err := gif.Encode(&b, sampleImage(), nil); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// sampleWebP is a 1x1 lossless WebP image.
func sampleWebP() []byte {
	return []byte{
		'R', 'I', 'F', 'F', 0x1a, 0, 0, 0, 'W', 'E', 'B', 'P',
		'V', 'P', '8', 'L', 0x0d, 0, 0, 0, 0x2f, 0, 0, 0,
		0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0x00,
	}
}

func le16(v int) []byte          { return binary.LittleEndian.AppendUint16(nil, uint16(v)) }
func le32(v int) []byte          { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func be32(v int) []byte          { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// sampleWAV is a 16-bit mono PCM WAV of a 440 Hz tone.
func sampleWAV() []byte {
	var samples []byte
	for i := range 2000 {
		v := int16(8000 * math.Sin(2*math.Pi*440*float64(i)/8000))
		samples = append(samples, le16(int(v))...)
	}
	return cat(
		[]byte("RIFF"), le32(36+len(samples)), []byte("WAVE"),
		[]byte("fmt "), le32(16), le16(1), le16(1), le32(8000), le32(16000), le16(2), le16(16),
		[]byte("data"), le32(len(samples)), samples,
	)
}

// sampleMP3 is eight MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz) with no tag.
func sampleMP3() []byte {
	frame := make([]byte, 417)
	copy(frame, []byte{0xff, 0xfb, 0x90, 0x64})
	return bytes.Repeat(frame, 8)
}

func box(typ string, payload ...[]byte) []byte {
	body := cat(payload...)
	return cat(be32(8+len(body)), []byte(typ), body)
}

func ftyp(major string, compatible ...string) []byte {
	parts := [][]byte{[]byte(major), be32(0x200)}
	for _, c := range compatible {
		parts = append(parts, []byte(c))
	}
	return box("ftyp", parts...)
}

func sampleMP4() []byte {
	return cat(ftyp("isom", "isom", "iso2", "avc1", "mp41"), box("free"), box("mdat", make([]byte, 64)))
}

func sampleMOV() []byte { return cat(ftyp("qt  ", "qt  "), box("wide"), box("mdat", make([]byte, 64))) }

func sampleM4A() []byte {
	return cat(ftyp("M4A ", "M4A ", "mp42", "isom"), box("mdat", make([]byte, 64)))
}

func ebmlSize(n int) []byte {
	switch {
	case n < 0x7f:
		return []byte{0x80 | byte(n)}
	case n < 0x3fff:
		return []byte{0x40 | byte(n>>8), byte(n)}
	default:
		return []byte{0x10 | byte(n>>24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
}

func ebml(id []byte, payload ...[]byte) []byte {
	body := cat(payload...)
	return cat(id, ebmlSize(len(body)), body)
}

func ebmlUint(id []byte, v int) []byte { return ebml(id, []byte{byte(v)}) }

// sampleWebM is the leading elements of a WebM video with one VP8 track.
func sampleWebM() []byte {
	header := ebml([]byte{0x1a, 0x45, 0xdf, 0xa3},
		ebmlUint([]byte{0x42, 0x86}, 1), ebmlUint([]byte{0x42, 0xf7}, 1),
		ebmlUint([]byte{0x42, 0xf2}, 4), ebmlUint([]byte{0x42, 0xf3}, 8),
		ebml([]byte{0x42, 0x82}, []byte("webm")),
		ebmlUint([]byte{0x42, 0x87}, 4), ebmlUint([]byte{0x42, 0x85}, 2))
	info := ebml([]byte{0x15, 0x49, 0xa9, 0x66},
		ebml([]byte{0x2a, 0xd7, 0xb1}, []byte{0x0f, 0x42, 0x40}),
		ebml([]byte{0x4d, 0x80}, []byte("studio")), ebml([]byte{0x57, 0x41}, []byte("studio")))
	entry := ebml([]byte{0xae},
		ebmlUint([]byte{0xd7}, 1), ebmlUint([]byte{0x73, 0xc5}, 1),
		ebmlUint([]byte{0x83}, 1), ebml([]byte{0x86}, []byte("V_VP8")),
		ebml([]byte{0xe0}, ebmlUint([]byte{0xb0}, 16), ebmlUint([]byte{0xba}, 16)))
	tracks := ebml([]byte{0x16, 0x54, 0xae, 0x6b}, entry)
	cluster := cat([]byte{0x1f, 0x43, 0xb6, 0x75, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ebmlUint([]byte{0xe7}, 0))
	segment := cat([]byte{0x18, 0x53, 0x80, 0x67, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, info, tracks, cluster)
	return cat(header, segment, make([]byte, 64))
}

// sampleFLAC is a FLAC stream header with its STREAMINFO and a padding block.
func sampleFLAC() []byte {
	streamInfo := cat(
		[]byte{0x10, 0x00, 0x10, 0x00}, []byte{0, 0, 0x10, 0, 0x20, 0}, []byte{0x0a, 0xc4, 0x42, 0xf0},
		[]byte{0, 0, 0x10, 0}, make([]byte, 16),
	)
	return cat([]byte("fLaC"), []byte{0x00, 0, 0, 34}, streamInfo, []byte{0x81, 0, 0, 8}, make([]byte, 8))
}

// sampleOgg is the first page of an Ogg Opus stream, with a correct page checksum.
func sampleOgg() []byte {
	head := cat([]byte("OpusHead"), []byte{1, 2}, le16(312), le32(48000), le16(0), []byte{0})
	page := cat([]byte("OggS"), []byte{0, 0x02}, make([]byte, 8), le32(0x5354), le32(0), le32(0),
		[]byte{1, byte(len(head))}, head)
	var crc uint32
	for _, c := range page {
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04c11db7
			} else {
				crc <<= 1
			}
		}
	}
	binary.LittleEndian.PutUint32(page[22:26], crc)
	return page
}

// padded returns sample followed by zero bytes up to size in total.
func padded(sample []byte, size int) []byte {
	b := make([]byte, size)
	copy(b, sample)
	return b
}

// ---- helpers ----

// formField is one multipart field: a plain field, or a file when filename is set.
type formField struct {
	name, filename, contentType string
	data                        []byte
}

func fileField(filename, contentType string, data []byte) formField {
	return formField{name: "file", filename: filename, contentType: contentType, data: data}
}

func textField(name, value string) formField { return formField{name: name, data: []byte(value)} }

// multipartBody encodes fields in order and returns the body and its Content-Type.
func multipartBody(t testing.TB, fields ...formField) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		h := textproto.MIMEHeader{}
		if f.filename != "" {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, f.name, f.filename))
			h.Set("Content-Type", f.contentType)
		} else {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, f.name))
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(f.data)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), mw.FormDataContentType()
}

// upload posts a multipart body to /api/upload-ref with a credential.
func (e *env) upload(key string, fields ...formField) *resp {
	e.t.Helper()
	body, ct := multipartBody(e.t, fields...)
	return e.callH("POST", "/api/upload-ref", map[string]string{"X-API-Key": key, "Content-Type": ct}, body)
}

// storedUploads lists the files under the local media store's uploads folder.
func (e *env) storedUploads() []string {
	e.t.Helper()
	var files []string
	root := filepath.Join(e.app.Config.DataDir, "media", "uploads")
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files
}

// uploadRows counts the upload rows, committed or pending.
func (e *env) uploadRows(committed bool) int64 {
	e.t.Helper()
	var n int64
	if err := e.app.DB.Gorm.Model(&models.Upload{}).Where("committed = ?", committed).Count(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

// fetch GETs a URL and returns the status, Content-Type and body.
func fetch(t *testing.T, url string) (int, string, []byte) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), b
}

// ---- POST /api/upload-ref ----

func TestUploadEveryFormatIsStoredAndServed(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("Acme", 0)
	cases := []struct {
		name, filename, declared string
		data                     []byte
		mediaType, mime, ext     string
	}{
		{"png", "a.png", "image/png", samplePNG(), "image", "image/png", ".png"},
		{"jpeg", "a.jpg", "image/jpeg", sampleJPEG(), "image", "image/jpeg", ".jpg"},
		{"webp", "a.webp", "image/webp", sampleWebP(), "image", "image/webp", ".webp"},
		{"gif", "a.gif", "image/gif", sampleGIF(), "image", "image/gif", ".gif"},
		{"mp3", "a.mp3", "audio/mpeg", sampleMP3(), "audio", "audio/mpeg", ".mp3"},
		{"wav", "a.wav", "audio/wav", sampleWAV(), "audio", "audio/wav", ".wav"},
		{"m4a", "a.m4a", "audio/mp4", sampleM4A(), "audio", "audio/mp4", ".m4a"},
		{"flac", "a.flac", "audio/flac", sampleFLAC(), "audio", "audio/flac", ".flac"},
		{"ogg", "a.ogg", "audio/ogg", sampleOgg(), "audio", "audio/ogg", ".ogg"},
		{"mp4", "a.mp4", "video/mp4", sampleMP4(), "video", "video/mp4", ".mp4"},
		{"mov", "a.mov", "video/quicktime", sampleMOV(), "video", "video/quicktime", ".mov"},
		{"webm", "a.webm", "video/webm", sampleWebM(), "video", "video/webm", ".webm"},
		{"jpeg declared as png", "x.png", "image/png", sampleJPEG(), "image", "image/jpeg", ".jpg"},
		{"png with no name or type", "blob", "application/octet-stream", samplePNG(), "image", "image/png", ".png"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.upload(key, fileField(c.filename, c.declared, c.data)).expect(t, 200)
			url := r.str("url")
			if r.JSON["ok"] != true || r.str("media_type") != c.mediaType || r.str("mime") != c.mime {
				t.Fatalf("answer = %s, want media_type %s mime %s", r.Body, c.mediaType, c.mime)
			}
			prefix := e.app.Config.CDNURL + "/uploads/tenant-" + tenantID + "/"
			if !strings.HasPrefix(url, prefix) || !strings.HasSuffix(url, c.ext) {
				t.Fatalf("url = %s, want %s<uuid>%s", url, prefix, c.ext)
			}
			status, ct, body := fetch(t, url)
			if status != 200 || ct != c.mime || !bytes.Equal(body, c.data) {
				t.Fatalf("served back: %d %s, %d bytes (same bytes: %v); want 200 %s", status, ct, len(body), bytes.Equal(body, c.data), c.mime)
			}
			var row models.Upload
			if err := e.app.DB.Gorm.First(&row, "url = ?", url).Error; err != nil {
				t.Fatalf("no upload row for %s: %v", url, err)
			}
			if row.OwnerKind != "tenant" || row.OwnerID != tenantID || row.TenantID == nil || *row.TenantID != tenantID ||
				!row.Committed || row.Size != int64(len(c.data)) || row.MIME != c.mime || row.MediaType != c.mediaType {
				t.Fatalf("row = %+v", row)
			}
		})
	}
}

func TestUploadRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 0)
	random := make([]byte, 5000)
	_, _ = rand.Read(random)
	cases := []struct {
		name   string
		fields []formField
		status int
		msg    string
	}{
		{"random bytes", []formField{fileField("a.png", "image/png", random)}, 400, "unrecognised file type"},
		{"empty file", []formField{fileField("a.png", "image/png", nil)}, 400, "unrecognised file type"},
		{"text", []formField{fileField("a.txt", "text/plain", []byte("hello, world\n"))}, 400, "unrecognised file type"},
		{"missing file", []formField{textField("workspace_id", "ws1")}, 400, "missing file"},
		{"file in another field", []formField{{name: "upload", filename: "a.png", contentType: "image/png", data: samplePNG()}}, 400, "missing file"},
		{"workspace with a slash", []formField{textField("workspace_id", "a/b"), fileField("a.png", "image/png", samplePNG())}, 400, "workspace_id"},
		{"workspace with dots", []formField{textField("workspace_id", ".."), fileField("a.png", "image/png", samplePNG())}, 400, "workspace_id"},
		{"workspace too long", []formField{textField("workspace_id", strings.Repeat("w", 65)), fileField("a.png", "image/png", samplePNG())}, 400, "at most 64"},
		{"bad workspace after file", []formField{fileField("a.png", "image/png", samplePNG()), textField("workspace_id", "a/b")}, 400, "workspace_id"},
		{"workspace twice", []formField{textField("workspace_id", "ws1"), fileField("a.png", "image/png", samplePNG()), textField("workspace_id", "ws2")}, 400, "once"},
		{"two files", []formField{fileField("a.png", "image/png", samplePNG()), fileField("b.png", "image/png", samplePNG())}, 400, "one file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.upload(key, c.fields...).expect(t, c.status)
			if !strings.Contains(r.str("error"), c.msg) {
				t.Fatalf("error = %q, want it to mention %q", r.str("error"), c.msg)
			}
		})
	}
	t.Run("not multipart", func(t *testing.T) {
		r := e.call("POST", "/api/upload-ref", key, map[string]any{"file": "x"}).expect(t, 400)
		if !strings.Contains(r.str("error"), "multipart/form-data") {
			t.Fatalf("error = %q", r.str("error"))
		}
	})
	t.Run("cut short", func(t *testing.T) {
		body, ct := multipartBody(t, fileField("a.png", "image/png", padded(samplePNG(), 20000)))
		body = body[:len(body)-200] // no closing boundary
		r := e.callH("POST", "/api/upload-ref", map[string]string{"X-API-Key": key, "Content-Type": ct}, body).expect(t, 400)
		if !strings.Contains(r.str("error"), "malformed multipart") {
			t.Fatalf("error = %q", r.str("error"))
		}
	})
	if files := e.storedUploads(); len(files) != 0 {
		t.Fatalf("refused uploads left files behind: %v", files)
	}
	if n := e.uploadRows(true) + e.uploadRows(false); n != 0 {
		t.Fatalf("refused uploads left %d rows", n)
	}
}

func TestUploadWorkspaceSubfolder(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 10)
	r := e.upload(key, textField("workspace_id", "Campaign_2026-a"), fileField("a.gif", "image/gif", sampleGIF())).expect(t, 200)
	if !strings.Contains(r.str("url"), "/Campaign_2026-a/") {
		t.Fatalf("url = %s, want the workspace subfolder", r.str("url"))
	}
	if status, _, _ := fetch(t, r.str("url")); status != 200 {
		t.Fatalf("served back: %d", status)
	}
	// The fields may come in any order: a workspace_id after the file moves the stored file there.
	gif := sampleGIF()
	r = e.upload(key, fileField("b.gif", "image/gif", gif), textField("workspace_id", "after_file")).expect(t, 200)
	if !strings.Contains(r.str("url"), "/after_file/") {
		t.Fatalf("url = %s, want the workspace subfolder when workspace_id follows the file", r.str("url"))
	}
	if status, _, body := fetch(t, r.str("url")); status != 200 || !bytes.Equal(body, gif) {
		t.Fatalf("served back: %d, %d bytes, want the %d uploaded bytes", status, len(body), len(gif))
	}
	if files := e.storedUploads(); len(files) != 2 {
		t.Fatalf("stored files = %v, want the two uploads only (the moved file's first copy removed)", files)
	}
	if n := e.uploadRows(true); n != 2 {
		t.Fatalf("upload rows = %d, want 2", n)
	}
	// The moved file is a committed upload of this service: a generation may use it.
	e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "reference_images": []string{r.str("url")}}).expect(t, 200)
}

func TestUploadIdentities(t *testing.T) {
	e := newEnv(t)
	_, tenantKey := e.tenant("Acme", 10)
	accountID, accountKey := e.member(tenantKey, map[string]any{})
	userID, token := e.personalLogin("pat@example.com", 0)
	png := fileField("a.png", "image/png", samplePNG())
	cases := []struct {
		name, key string
		status    int
		owner     string
	}{
		{"tenant key", tenantKey, 200, ""},
		{"member account key", accountKey, 200, "/uploads/account-" + accountID + "/"},
		{"personal login", token, 200, "/uploads/user-" + userID + "/"},
		{"administrator key", e.adminKey, 403, ""},
		{"no key", "", 401, ""},
		{"unknown key", models.NewAPIKey(), 401, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.upload(c.key, png).expect(t, c.status)
			if c.owner != "" && !strings.Contains(r.str("url"), c.owner) {
				t.Fatalf("url = %s, want it under %s", r.str("url"), c.owner)
			}
		})
	}
}

func TestUploadImageSizeLimit(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 0)
	atLimit := padded(samplePNG(), int(media.MaxImageSize))
	r := e.upload(key, fileField("big.png", "image/png", atLimit)).expect(t, 200)
	if status, _, body := fetch(t, r.str("url")); status != 200 || len(body) != len(atLimit) {
		t.Fatalf("served back %d, %d bytes; want %d bytes", status, len(body), len(atLimit))
	}
	over := padded(samplePNG(), int(media.MaxImageSize)+1)
	r = e.upload(key, fileField("big.png", "image/png", over)).expect(t, 413)
	if msg := r.str("error"); !strings.Contains(msg, "8 MB") || !strings.Contains(msg, "8388608 bytes") {
		t.Fatalf("error = %q, want it to name the 8 MB limit", msg)
	}
	if files := e.storedUploads(); len(files) != 1 {
		t.Fatalf("stored files = %v, want only the one at the limit", files)
	}
	if n := e.uploadRows(true); n != 1 {
		t.Fatalf("upload rows = %d, want 1", n)
	}
	// An audio file may be larger than an image: the limit follows the detected format.
	e.upload(key, fileField("a.wav", "audio/wav", padded(sampleWAV(), int(media.MaxImageSize)+1))).expect(t, 200)
}

func TestUploadRateLimit(t *testing.T) {
	e := newEnv(t, withVar("SERVICE_UPLOAD_RATE", "3"))
	_, key := e.tenant("Acme", 0)
	png := fileField("a.png", "image/png", samplePNG())
	e.upload(key, png).expect(t, 200)
	e.upload(key, fileField("a.txt", "text/plain", []byte("not media"))).expect(t, 400) // refused files do not count
	e.upload(key, png).expect(t, 200)
	e.upload(key, png).expect(t, 200)
	r := e.upload(key, png).expect(t, 429)
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
	if files := e.storedUploads(); len(files) != 3 {
		t.Fatalf("stored files = %d, want 3", len(files))
	}
	_, other := e.tenant("Other", 0)
	e.upload(other, png).expect(t, 200)
}

// TestUploadBodyLimit streams a body past the route's whole limit (the largest file plus 1 MB of
// framing) in a field that is not the file: the server stops reading there and answers 413.
func TestUploadBodyLimit(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 0)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		w, err := mw.CreateFormField("note")
		if err == nil {
			_, err = io.Copy(w, newZeroStream(nil, media.MaxVideoSize+1<<20))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/upload-ref", pr)
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 413 || !strings.Contains(string(body), "request body too large") {
		t.Fatalf("answer = %d %s", res.StatusCode, body)
	}
}

// TestUploadTooSlowIsCutOff sends part of a body and then stalls: the server answers within its
// minimum-rate window instead of waiting for the rest.
func TestUploadTooSlowIsCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 20 s minimum-rate window")
	}
	e := newEnv(t)
	_, key := e.tenant("Acme", 0)
	body, ct := multipartBody(t, fileField("a.png", "image/png", padded(samplePNG(), 200000)))
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/upload-ref HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", key, ct, len(body))
	_, _ = conn.Write(body[:1000])
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer after %s: %v", time.Since(start), err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 400 || !strings.Contains(string(b), "too slow") {
		t.Fatalf("answer = %d %s", res.StatusCode, b)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("cut off after %s, want about 20 s", d)
	}
	if files := e.storedUploads(); len(files) != 0 {
		t.Fatalf("a cut-off upload left files: %v", files)
	}
}

// ---- direct uploads: presign and commit ----

// withS3 starts a real S3-compatible server and configures the service to store media in it.
func withS3(t *testing.T) (media.S3Config, envOption) {
	cfg := s3test.Start(t)
	return cfg, func(c *envConfig) {
		c.vars["SERVICE_S3_ENDPOINT"] = cfg.Endpoint
		c.vars["SERVICE_S3_BUCKET"] = cfg.Bucket
		c.vars["SERVICE_S3_REGION"] = cfg.Region
		c.vars["SERVICE_S3_ACCESS_KEY"] = cfg.AccessKey
		c.vars["SERVICE_S3_SECRET_KEY"] = cfg.SecretKey
		c.vars["SERVICE_S3_PUBLIC_URL"] = cfg.PublicURL
	}
}

// presign asks for a direct upload and fails the test unless the answer has the direct shape.
func (e *env) presign(key, ext string, size int) *resp {
	e.t.Helper()
	r := e.call("POST", "/api/upload-ref/presign", key, map[string]any{"ext": ext, "size": size}).expect(e.t, 200)
	if r.str("strategy") != "direct" {
		e.t.Fatalf("presign = %s, want the direct strategy", r.Body)
	}
	return r
}

// put sends the signed PUT of a presign answer with its headers, changed by edit when not nil, and
// returns the store's status. It writes the request itself on a raw connection while reading the
// answer, because the store answers a tampered request with 403 and resets the connection while the
// body is still being written, which the standard client reports as a write error instead.
func put(t *testing.T, presign *resp, body []byte, edit func(h http.Header)) int {
	t.Helper()
	up := presign.JSON["upload"].(map[string]any)
	u, err := url.Parse(up["url"].(string))
	if err != nil || up["method"] != "PUT" {
		t.Fatalf("upload = %v (%v)", up, err)
	}
	h := http.Header{}
	for k, v := range up["headers"].(map[string]any) {
		h.Set(k, v.(string))
	}
	if edit != nil {
		edit(h)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "PUT %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", u.RequestURI(), u.Host)
	_ = h.Write(&head)
	head.WriteString("\r\n")
	go func() {
		// A write error is expected when the store refuses early; its answer is what counts.
		if _, err := conn.Write(head.Bytes()); err == nil {
			_, _ = conn.Write(body)
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("PUT %s: %v", u.Path, err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestDirectUploadEndToEnd(t *testing.T) {
	s3cfg, s3 := withS3(t)
	e := newEnv(t, s3)
	tenantID, key := e.tenant("Acme", 0)
	video := padded(sampleMP4(), 3<<20)

	r := e.presign(key, "mp4", len(video))
	k := r.str("key")
	up := r.JSON["upload"].(map[string]any)
	headers := up["headers"].(map[string]any)
	if !strings.HasPrefix(k, "uploads/tenant-"+tenantID+"/") || !strings.HasSuffix(k, ".mp4") ||
		r.str("media_type") != "video" || r.str("mime") != "video/mp4" || up["method"] != "PUT" || up["expires_in"] != float64(300) ||
		headers["Content-Type"] != "video/mp4" || headers["Content-Length"] != fmt.Sprint(len(video)) {
		t.Fatalf("presign = %s", r.Body)
	}
	commit := r.JSON["commit"].(map[string]any)
	if commit["path"] != "/api/upload-ref/commit" || commit["body"].(map[string]any)["key"] != k ||
		r.JSON["fallback"].(map[string]any)["path"] != "/api/upload-ref" {
		t.Fatalf("presign = %s", r.Body)
	}
	if n := e.uploadRows(false); n != 1 {
		t.Fatalf("pending rows = %d, want 1", n)
	}

	// Committing before the PUT is refused, and the key stays pending.
	e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": k}).expect(t, 400)

	// Any change to the signed headers is refused by the store itself.
	if s := put(t, r, video, func(h http.Header) { h.Set("Content-Type", "image/png") }); s != 403 {
		t.Fatalf("PUT with another Content-Type: %d, want 403", s)
	}
	if s := put(t, r, video[:len(video)-1], func(h http.Header) { h.Set("Content-Length", fmt.Sprint(len(video)-1)) }); s != 403 {
		t.Fatalf("PUT with another Content-Length: %d, want 403", s)
	}
	if s := put(t, r, video, nil); s != 200 {
		t.Fatalf("PUT with the signed headers: %d, want 200", s)
	}

	// Only the caller may commit its key.
	_, otherKey := e.tenant("Other", 0)
	e.call("POST", "/api/upload-ref/commit", otherKey, map[string]any{"key": k}).expect(t, 404)
	e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": "uploads/tenant-" + tenantID + "/nope.mp4"}).expect(t, 404)
	e.call("POST", "/api/upload-ref/commit", key, map[string]any{}).expect(t, 400)

	c := e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": k}).expect(t, 200)
	if c.JSON["ok"] != true || c.str("url") != s3cfg.PublicURL+"/"+k || c.str("media_type") != "video" || c.str("mime") != "video/mp4" {
		t.Fatalf("commit = %s", c.Body)
	}
	if e.uploadRows(true) != 1 || e.uploadRows(false) != 0 {
		t.Fatalf("rows after commit: %d committed, %d pending", e.uploadRows(true), e.uploadRows(false))
	}
	again := e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": k}).expect(t, 200)
	if again.str("url") != c.str("url") {
		t.Fatalf("second commit = %s", again.Body)
	}
	_, info, err := e.svc.Media.ReadHead(context.Background(), k, 16)
	if err != nil || info.Size != int64(len(video)) {
		t.Fatalf("stored object: %v, %d bytes", err, info.Size)
	}

	// The proxy path stores into the same bucket.
	p := e.upload(key, fileField("a.png", "image/png", samplePNG())).expect(t, 200)
	if !strings.HasPrefix(p.str("url"), s3cfg.PublicURL+"/uploads/") {
		t.Fatalf("proxy upload on S3 = %s", p.Body)
	}
}

func TestDirectUploadCommitRefusesMismatches(t *testing.T) {
	s3cfg, s3 := withS3(t)
	e := newEnv(t, s3)
	_, key := e.tenant("Acme", 0)
	ctx := context.Background()
	store := e.svc.Media

	t.Run("another type", func(t *testing.T) {
		r := e.presign(key, "png", 2<<20)
		if s := put(t, r, padded(sampleMP4(), 2<<20), nil); s != 200 {
			t.Fatalf("PUT: %d", s)
		}
		c := e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": r.str("key")}).expect(t, 400)
		if !strings.Contains(c.str("error"), "does not match") || !strings.Contains(c.str("error"), "video/mp4") {
			t.Fatalf("error = %q", c.str("error"))
		}
		if _, _, err := store.ReadHead(ctx, r.str("key"), 16); err == nil {
			t.Fatal("the refused object is still stored")
		}
		e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": r.str("key")}).expect(t, 404)
	})
	t.Run("unrecognised bytes", func(t *testing.T) {
		r := e.presign(key, "webm", 1<<20)
		junk := make([]byte, 1<<20)
		_, _ = rand.Read(junk)
		if s := put(t, r, junk, nil); s != 200 {
			t.Fatalf("PUT: %d", s)
		}
		e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": r.str("key")}).expect(t, 400)
		if _, _, err := store.ReadHead(ctx, r.str("key"), 16); err == nil {
			t.Fatal("the refused object is still stored")
		}
	})
	t.Run("another size", func(t *testing.T) {
		// The signed Content-Length stops this at the PUT; write the object behind the service's back.
		r := e.presign(key, "wav", 2<<20)
		direct, err := media.NewS3(s3cfg)
		if err != nil {
			t.Fatal(err)
		}
		wav := padded(sampleWAV(), 3<<20)
		if err := direct.Put(ctx, r.str("key"), bytes.NewReader(wav), int64(len(wav)), "audio/wav"); err != nil {
			t.Fatal(err)
		}
		c := e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": r.str("key")}).expect(t, 400)
		if !strings.Contains(c.str("error"), fmt.Sprint(3<<20)) {
			t.Fatalf("error = %q, want it to name the true size", c.str("error"))
		}
		if _, _, err := store.ReadHead(ctx, r.str("key"), 16); err == nil {
			t.Fatal("the refused object is still stored")
		}
	})
	if n := e.uploadRows(false) + e.uploadRows(true); n != 0 {
		t.Fatalf("refused direct uploads left %d rows", n)
	}
}

func TestPresignValidationAndProxyReasons(t *testing.T) {
	_, s3 := withS3(t)
	e := newEnv(t, s3)
	_, key := e.tenant("Acme", 0)
	cases := []struct {
		name   string
		body   any
		status int
		reason string
	}{
		{"too small", map[string]any{"ext": "png", "size": 1<<20 - 1}, 200, "too_small"},
		{"one MB is direct", map[string]any{"ext": "jpeg", "size": 1 << 20}, 200, ""},
		{"unknown ext", map[string]any{"ext": "exe", "size": 2 << 20}, 400, ""},
		{"no size", map[string]any{"ext": "png"}, 400, ""},
		{"zero size", map[string]any{"ext": "png", "size": 0}, 400, ""},
		{"fractional size", map[string]any{"ext": "png", "size": 1.5}, 400, ""},
		{"size as a string", `{"ext": "png", "size": "2000000"}`, 400, ""},
		{"image over its limit", map[string]any{"ext": "png", "size": 8<<20 + 1}, 413, ""},
		{"video at its limit", map[string]any{"ext": "mp4", "size": 50 << 20}, 200, ""},
		{"video over its limit", map[string]any{"ext": "webm", "size": 50<<20 + 1}, 413, ""},
		{"bad workspace", map[string]any{"ext": "png", "size": 2 << 20, "workspace_id": "../x"}, 400, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/api/upload-ref/presign", key, c.body).expect(t, c.status)
			if c.status != 200 {
				return
			}
			want := "direct"
			if c.reason != "" {
				want = "proxy"
			}
			if r.str("strategy") != want || r.str("reason") != c.reason || r.JSON["fallback"].(map[string]any)["path"] != "/api/upload-ref" {
				t.Fatalf("presign = %s, want %s %s", r.Body, want, c.reason)
			}
		})
	}
	r := e.call("POST", "/api/upload-ref/presign", key, map[string]any{"ext": "png", "size": 2 << 20, "workspace_id": "ws_1"}).expect(t, 200)
	if !strings.Contains(r.str("key"), "/ws_1/") || r.str("mime") != "image/png" {
		t.Fatalf("presign with a workspace = %s", r.Body)
	}
	if r := e.call("POST", "/api/upload-ref/presign", e.adminKey, map[string]any{"ext": "png", "size": 2 << 20}); r.Status != 403 {
		t.Fatalf("administrator presign: %d", r.Status)
	}
	if r := e.call("POST", "/api/upload-ref/presign", "", map[string]any{"ext": "png", "size": 2 << 20}); r.Status != 401 {
		t.Fatalf("presign without a key: %d", r.Status)
	}
}

func TestPresignWithoutS3IsProxyNotConfigured(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("Acme", 0)
	r := e.call("POST", "/api/upload-ref/presign", key, map[string]any{"ext": "mp4", "size": 20 << 20}).expect(t, 200)
	if r.str("strategy") != "proxy" || r.str("reason") != "not_configured" || r.JSON["fallback"].(map[string]any)["path"] != "/api/upload-ref" {
		t.Fatalf("presign = %s", r.Body)
	}
	if n := e.uploadRows(false); n != 0 {
		t.Fatalf("a proxy answer recorded %d pending rows", n)
	}
}

func TestDirectUploadCountsTowardTheRateLimitAtCommit(t *testing.T) {
	_, s3 := withS3(t)
	e := newEnv(t, s3, withVar("SERVICE_UPLOAD_RATE", "2"))
	_, key := e.tenant("Acme", 0)
	image := padded(samplePNG(), 1<<20)
	first := e.presign(key, "png", len(image))
	second := e.presign(key, "png", len(image)) // presign does not count toward the upload limit
	for _, r := range []*resp{first, second} {
		if s := put(t, r, image, nil); s != 200 {
			t.Fatalf("PUT: %d", s)
		}
	}
	e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": first.str("key")}).expect(t, 200)
	e.upload(key, fileField("a.png", "image/png", samplePNG())).expect(t, 200)
	// The hour's two uploads are used: the commit waits, the key stays pending, presign refuses.
	r := e.call("POST", "/api/upload-ref/commit", key, map[string]any{"key": second.str("key")}).expect(t, 429)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	if n := e.uploadRows(false); n != 1 {
		t.Fatalf("pending rows = %d, want 1", n)
	}
	e.call("POST", "/api/upload-ref/presign", key, map[string]any{"ext": "png", "size": len(image)}).expect(t, 429)
}

// ---- benchmark ----

// BenchmarkUpload50MB posts a 50 MB video (the largest accepted file) through POST /api/upload-ref to an
// in-process server and reports the peak growth of the live heap while it runs (target: under 16 MB).
func BenchmarkUpload50MB(b *testing.B) {
	srv, key := benchServer(b)
	head := sampleMP4()
	var peak, total uint64
	for b.Loop() {
		p, t := heapPeak(func() {
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			go func() {
				h := textproto.MIMEHeader{}
				h.Set("Content-Disposition", `form-data; name="file"; filename="big.mp4"`)
				h.Set("Content-Type", "video/mp4")
				w, err := mw.CreatePart(h)
				if err == nil {
					_, err = io.Copy(w, newZeroStream(head, media.MaxVideoSize))
				}
				if err == nil {
					err = mw.Close()
				}
				pw.CloseWithError(err)
			}()
			req, _ := http.NewRequest("POST", srv.URL+"/api/upload-ref", pr)
			req.Header.Set("X-API-Key", key)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Fatalf("upload: %d %s", res.StatusCode, body)
			}
		})
		peak, total = max(peak, p), total+t
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "alloc-MB/op")
	b.SetBytes(media.MaxVideoSize)
	if peak >= 16<<20 {
		b.Errorf("peak heap growth %.1f MB, want under 16 MB", float64(peak)/(1<<20))
	}
}

// benchServer starts the service in-process over a fresh database for a benchmark and returns it with a tenant key.
func benchServer(b *testing.B) (*httptest.Server, string) {
	db := modelstest.NewDB(b)
	srv := httptest.NewUnstartedServer(nil)
	vars := map[string]string{"SERVICE_ADDR": srv.Listener.Addr().String(), "SERVICE_DATA_DIR": b.TempDir(),
		"SERVICE_UPLOAD_RATE": "1000000"}
	cfg, err := models.LoadConfig(func(v models.ConfigVar) (string, bool) { val, ok := vars[v.Env]; return val, ok })
	if err != nil {
		b.Fatal(err)
	}
	cfg.DatabaseURL = db.URL
	svc, err := server.New(context.Background(), db, cfg, server.Options{Jobs: jobs.Options{}})
	if err != nil {
		b.Fatal(err)
	}
	srv.Config.Handler = svc.Handler(server.Options{})
	srv.Start()
	b.Cleanup(srv.Close)
	_, key, err := svc.App.Accounts().CreateTenant(context.Background(), models.TenantInput{Name: "Bench"})
	if err != nil {
		b.Fatal(err)
	}
	return srv, key
}

// zeroStream serves head then zero bytes, size bytes in all, without holding them in memory.
type zeroStream struct {
	head      []byte
	size, off int64
}

func newZeroStream(head []byte, size int64) *zeroStream { return &zeroStream{head: head, size: size} }

func (s *zeroStream) Read(p []byte) (int, error) {
	if s.off >= s.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.size-s.off)]
	n := 0
	if s.off < int64(len(s.head)) {
		n = copy(p, s.head[s.off:])
	}
	clear(p[n:])
	s.off += int64(len(p))
	return len(p), nil
}

// heapPeak runs fn and returns the peak growth of the live heap seen meanwhile (sampled every
// millisecond) and the bytes allocated in all.
func heapPeak(fn func()) (peakGrowth, allocated uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	base := read()
	var peak atomic.Uint64
	peak.Store(base)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	runtime.ReadMemStats(&after)
	return peak.Load() - base, after.TotalAlloc - before.TotalAlloc
}
