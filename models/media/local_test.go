package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func newLocal(tb testing.TB) *Local {
	tb.Helper()
	s, err := NewLocal(filepath.Join(tb.TempDir(), "media"), "http://cdn.test/media")
	if err != nil {
		tb.Fatalf("NewLocal: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// storedFiles lists every file under the store's directory, temporary ones included.
func storedFiles(tb testing.TB, s *Local) []string {
	tb.Helper()
	var files []string
	err := filepath.WalkDir(s.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(s.Dir(), p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("walk: %v", err)
	}
	return files
}

func TestLocalPutOpenDelete(t *testing.T) {
	ctx := context.Background()
	s := newLocal(t)
	data := SamplePNG()
	key := "uploads/owner-1/ws_2/abc.png"
	if err := s.Put(ctx, key, bytes.NewReader(data), int64(len(data)), "image/png"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rc, info, err := s.Open(ctx, key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Errorf("Open returned %d bytes, want the %d put", len(got), len(data))
	}
	if info.Size != int64(len(data)) || info.ContentType != "image/png" || info.ETag == "" || info.ModTime.IsZero() {
		t.Errorf("Open info = %+v", info)
	}
	head, info, err := s.ReadHead(ctx, key, 8)
	if err != nil || !bytes.Equal(head, data[:8]) || info.Size != int64(len(data)) {
		t.Errorf("ReadHead = %x, %+v, %v; want %x and size %d", head, info, err, data[:8], len(data))
	}
	head, _, err = s.ReadHead(ctx, key, 1<<20)
	if err != nil || !bytes.Equal(head, data) {
		t.Errorf("ReadHead(past end) = %d bytes, %v; want all %d", len(head), err, len(data))
	}
	if got := storedFiles(t, s); len(got) != 1 || got[0] != key {
		t.Errorf("files = %v, want only %s", got, key)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Errorf("Delete(missing) = %v, want nil", err)
	}
	if _, _, err := s.Open(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open(deleted) = %v, want ErrNotFound", err)
	}
	if _, _, err := s.ReadHead(ctx, key, 4); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadHead(deleted) = %v, want ErrNotFound", err)
	}
}

func TestLocalPutReplacesAtomically(t *testing.T) {
	ctx := context.Background()
	s := newLocal(t)
	key := "jobs/j1.png"
	if err := s.Put(ctx, key, strings.NewReader("first"), -1, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, key, strings.NewReader("second"), 6, ""); err != nil {
		t.Fatal(err)
	}
	head, _, _ := s.ReadHead(ctx, key, 100)
	if string(head) != "second" {
		t.Errorf("content = %q, want %q", head, "second")
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(len(p), f.n)
	clear(p[:n])
	f.n -= n
	return n, nil
}

func TestLocalPutFailureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		r    io.Reader
		size int64
		want error
	}{
		{"reader error", &failingReader{n: 100000}, -1, nil},
		{"too short for size", strings.NewReader("abc"), 4, ErrSizeMismatch},
		{"too long for size", strings.NewReader("abcde"), 4, ErrSizeMismatch},
		{"too large", &limitedReader{r: strings.NewReader("abcdef"), max: 5}, -1, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLocal(t)
			err := s.Put(ctx, "a/b/c.bin", tt.r, tt.size, "")
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Put = %v, want error %v", err, tt.want)
			}
			if files := storedFiles(t, s); len(files) != 0 {
				t.Errorf("files after failed Put = %v, want none", files)
			}
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		s := newLocal(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Put(cctx, "x.png", strings.NewReader("data"), -1, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("Put = %v, want context.Canceled", err)
		}
		if files := storedFiles(t, s); len(files) != 0 {
			t.Errorf("files = %v, want none", files)
		}
	})
}

func TestLocalRejectsTraversal(t *testing.T) {
	ctx := context.Background()
	s := newLocal(t)
	outside := filepath.Join(filepath.Dir(s.Dir()), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := []string{
		"", "../secret.txt", "a/../../secret.txt", "/etc/passwd", "a//b.png", "a/./b.png", ".hidden",
		"a/.tmp-1", `a\..\b`, "a/b/", "%2e%2e/secret.txt", "a b.png", "a\x00.png", strings.Repeat("a", 600),
	}
	for _, key := range keys {
		if err := s.Put(ctx, key, strings.NewReader("x"), 1, ""); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, _, err := s.Open(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Open(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	// A symbolic link inside the directory must not lead outside it either.
	if err := os.Symlink(outside, filepath.Join(s.Dir(), "link.txt")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx, "link.txt"); err == nil {
		t.Errorf("Open(symlink to outside) succeeded, want an error")
	}
	if err := os.Symlink(filepath.Dir(s.Dir()), filepath.Join(s.Dir(), "up")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "up/planted.png", strings.NewReader("x"), 1, ""); err == nil {
		t.Errorf("Put through a symlinked directory succeeded, want an error")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.Dir()), "planted.png")); err == nil {
		t.Errorf("a file was written outside the store")
	}
}

func TestJoinKey(t *testing.T) {
	tests := []struct {
		parts []string
		want  string
	}{
		{[]string{"uploads", "u1", "w1", "f.png"}, "uploads/u1/w1/f.png"},
		{[]string{"jobs", "0b7c.png"}, "jobs/0b7c.png"},
		{[]string{"uploads", "a/b"}, ""},
		{[]string{"uploads", ".."}, ""},
		{[]string{"uploads", ""}, ""},
		{[]string{"uploads", "ws?x"}, ""},
	}
	for _, tt := range tests {
		got, err := JoinKey(tt.parts...)
		if got != tt.want || (tt.want == "") != errors.Is(err, ErrInvalidKey) {
			t.Errorf("JoinKey(%q) = %q, %v; want %q", tt.parts, got, err, tt.want)
		}
	}
}

func TestLocalURLAndKeyFromURL(t *testing.T) {
	s := newLocal(t)
	key := "uploads/u/w/f.webp"
	u := s.URL(key)
	if u != "http://cdn.test/media/"+key {
		t.Errorf("URL = %q", u)
	}
	tests := []struct {
		url, key string
	}{
		{u, key},
		{"HTTP://CDN.test/media/" + key, key},
		{u + "?v=2", key},
		{"http://cdn.test/media/../x.png", ""},
		{"http://cdn.test/mediax/" + key, ""},
		{"http://other.test/media/" + key, ""},
		{"https://cdn.test/media/" + key, ""},
		{"http://user@cdn.test/media/" + key, ""},
		{"http://cdn.test/media/", ""},
		{"not a url at all", ""},
		{"http://cdn.test/media/a%2F..%2Fb.png", ""},
	}
	for _, tt := range tests {
		got, ok := s.KeyFromURL(tt.url)
		if got != tt.key || ok != (tt.key != "") {
			t.Errorf("KeyFromURL(%q) = %q, %v; want %q", tt.url, got, ok, tt.key)
		}
	}
	rel, err := NewLocal(t.TempDir(), "/media/")
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	if got := rel.URL("a.png"); got != "/media/a.png" {
		t.Errorf("relative URL = %q", got)
	}
	if got, ok := rel.KeyFromURL("/media/a.png"); !ok || got != "a.png" {
		t.Errorf("relative KeyFromURL = %q, %v", got, ok)
	}
}

func TestLocalHandler(t *testing.T) {
	ctx := context.Background()
	s := newLocal(t)
	png := SamplePNG()
	if err := s.Put(ctx, "uploads/u/w/a.png", bytes.NewReader(png), int64(len(png)), ""); err != nil {
		t.Fatal(err)
	}
	mp4 := SampleMP4()
	if err := s.Put(ctx, "jobs/v.mp4", bytes.NewReader(mp4), int64(len(mp4)), ""); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/media", s.Handler()))
	defer srv.Close()

	get := func(t *testing.T, method, path string, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}

	t.Run("full", func(t *testing.T) {
		resp, body := get(t, "GET", "/media/uploads/u/w/a.png", nil)
		if resp.StatusCode != 200 || !bytes.Equal(body, png) {
			t.Fatalf("status %d, %d bytes; want 200 and %d bytes", resp.StatusCode, len(body), len(png))
		}
		want := map[string]string{
			"Content-Type":           "image/png",
			"Cache-Control":          "public, max-age=31536000, immutable",
			"X-Content-Type-Options": "nosniff",
			"Accept-Ranges":          "bytes",
		}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
		if resp.Header.Get("ETag") == "" || resp.Header.Get("Last-Modified") == "" {
			t.Errorf("ETag %q, Last-Modified %q; want both set", resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
		}
	})
	t.Run("video type", func(t *testing.T) {
		resp, _ := get(t, "HEAD", "/media/jobs/v.mp4", nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "video/mp4" {
			t.Errorf("status %d, type %q; want 200 video/mp4", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})
	t.Run("range", func(t *testing.T) {
		resp, body := get(t, "GET", "/media/uploads/u/w/a.png", map[string]string{"Range": "bytes=1-3"})
		if resp.StatusCode != http.StatusPartialContent || string(body) != string(png[1:4]) {
			t.Errorf("status %d body %q; want 206 %q", resp.StatusCode, body, png[1:4])
		}
		if got := resp.Header.Get("Content-Range"); got != "bytes 1-3/"+strconv.Itoa(len(png)) {
			t.Errorf("Content-Range = %q", got)
		}
	})
	t.Run("conditional", func(t *testing.T) {
		first, _ := get(t, "GET", "/media/uploads/u/w/a.png", nil)
		resp, body := get(t, "GET", "/media/uploads/u/w/a.png", map[string]string{"If-None-Match": first.Header.Get("ETag")})
		if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("status %d with %d bytes, want 304 empty", resp.StatusCode, len(body))
		}
	})
	for _, path := range []string{
		"/media/uploads/u/w/missing.png", "/media/uploads/u/w", "/media/uploads/", "/media/",
		"/media/../media/uploads/u/w/a.png", "/media/uploads/u/w/%2e%2e/a.png", "/media/uploads/u/w/.tmp-x",
	} {
		t.Run("not found "+path, func(t *testing.T) {
			resp, body := get(t, "GET", path, nil)
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("status %d, want 404 (body %q)", resp.StatusCode, body)
			}
			if cc := resp.Header.Get("Cache-Control"); strings.Contains(cc, "immutable") {
				t.Errorf("404 is cached as immutable: %q", cc)
			}
		})
	}
	t.Run("method", func(t *testing.T) {
		resp, _ := get(t, "POST", "/media/uploads/u/w/a.png", nil)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("status %d, want 405", resp.StatusCode)
		}
	})
}

// TestFolderHandlesOutliveTheirEviction: a folder handle that a Put is using stays open when the cache of
// handles is full and starts over.
func TestFolderHandlesOutliveTheirEviction(t *testing.T) {
	s := newLocal(t)
	inUse, err := s.folder("jobs/busy")
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxCachedFolders {
		if _, err := s.folder(fmt.Sprintf("jobs/f%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, cached := s.folders["jobs/busy"]; cached {
		t.Fatal("the cache did not start over")
	}
	f, err := inUse.OpenFile("late", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatalf("writing through an evicted handle: %v", err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(s.Dir(), "jobs", "busy", "late")); err != nil {
		t.Fatal(err)
	}
}
