package media_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"studio/models/media"
	"studio/models/media/s3test"
)

func newS3(t *testing.T) (*media.S3, media.S3Config) {
	t.Helper()
	cfg := s3test.Start(t)
	store, err := media.NewS3(cfg)
	if err != nil {
		t.Fatalf("NewS3: %v", err)
	}
	return store, cfg
}

func TestS3(t *testing.T) {
	store, cfg := newS3(t)
	ctx := context.Background()

	t.Run("put open readhead delete", func(t *testing.T) {
		data := media.SamplePNG()
		key := "uploads/u1/w1/a.png"
		if err := store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), "image/png"); err != nil {
			t.Fatalf("Put: %v", err)
		}
		rc, info, err := store.Open(ctx, key)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, data) || info.Size != int64(len(data)) || info.ContentType != "image/png" {
			t.Errorf("Open = %d bytes, %+v; want %d bytes image/png", len(got), info, len(data))
		}
		head, info, err := store.ReadHead(ctx, key, 16)
		if err != nil || !bytes.Equal(head, data[:16]) || info.Size != int64(len(data)) {
			t.Errorf("ReadHead = %x, %+v, %v; want %x and true size %d", head, info, err, data[:16], len(data))
		}
		head, info, err = store.ReadHead(ctx, key, 1<<20)
		if err != nil || !bytes.Equal(head, data) || info.Size != int64(len(data)) {
			t.Errorf("ReadHead(past end) = %d bytes, %+v, %v", len(head), info, err)
		}
		if err := store.Delete(ctx, key); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if err := store.Delete(ctx, key); err != nil {
			t.Errorf("Delete(missing) = %v, want nil", err)
		}
		if _, _, err := store.Open(ctx, key); !errors.Is(err, media.ErrNotFound) {
			t.Errorf("Open(deleted) = %v, want ErrNotFound", err)
		}
		if _, _, err := store.ReadHead(ctx, key, 16); !errors.Is(err, media.ErrNotFound) {
			t.Errorf("ReadHead(deleted) = %v, want ErrNotFound", err)
		}
	})

	t.Run("unknown length and empty object", func(t *testing.T) {
		key := "jobs/stream.bin"
		if err := store.Put(ctx, key, io.MultiReader(strings.NewReader("abc"), strings.NewReader("def")), -1, ""); err != nil {
			t.Fatalf("Put: %v", err)
		}
		head, info, err := store.ReadHead(ctx, key, 4)
		if err != nil || string(head) != "abcd" || info.Size != 6 {
			t.Errorf("ReadHead = %q, %+v, %v", head, info, err)
		}
		if err := store.Put(ctx, "jobs/empty.bin", strings.NewReader(""), 0, ""); err != nil {
			t.Fatalf("Put(empty): %v", err)
		}
		head, info, err = store.ReadHead(ctx, "jobs/empty.bin", 4)
		if err != nil || len(head) != 0 || info.Size != 0 {
			t.Errorf("ReadHead(empty) = %q, %+v, %v", head, info, err)
		}
	})

	t.Run("ingest and inspect", func(t *testing.T) {
		obj, err := media.Ingest(ctx, store, "uploads/u/w", bytes.NewReader(media.SampleJPEG()), media.IngestOptions{})
		if err != nil || obj.Kind.Ext != ".jpg" {
			t.Fatalf("Ingest = %+v, %v", obj, err)
		}
		kind, info, err := media.Inspect(ctx, store, obj.Key, nil)
		if err != nil || kind != obj.Kind || info.Size != obj.Size || info.ContentType != "image/jpeg" {
			t.Errorf("Inspect = %+v, %+v, %v", kind, info, err)
		}
		_, err = media.Ingest(ctx, store, "uploads/u/w", io.MultiReader(bytes.NewReader(media.SampleMP4()), bytes.NewReader(make([]byte, 70000))),
			media.IngestOptions{MaxSize: 65536, Name: "too-big"})
		if !errors.Is(err, media.ErrTooLarge) {
			t.Fatalf("Ingest(over limit) = %v, want ErrTooLarge", err)
		}
		if _, _, err := store.ReadHead(ctx, "uploads/u/w/too-big.mp4", 1); !errors.Is(err, media.ErrNotFound) {
			t.Errorf("object after ErrTooLarge: ReadHead = %v, want ErrNotFound", err)
		}
	})

	t.Run("url round trip", func(t *testing.T) {
		key := "uploads/u/w/x.webm"
		u := store.URL(key)
		if u != cfg.PublicURL+"/"+key {
			t.Errorf("URL = %q", u)
		}
		if got, ok := store.KeyFromURL(u); !ok || got != key {
			t.Errorf("KeyFromURL(%q) = %q, %v", u, got, ok)
		}
		if _, ok := store.KeyFromURL("http://elsewhere.test/" + key); ok {
			t.Errorf("KeyFromURL accepted a foreign URL")
		}
	})

	t.Run("presigned put", func(t *testing.T) {
		data := media.SampleMP4()
		key := "uploads/u/w/direct.mp4"
		putURL, headers, err := store.PresignPut(ctx, key, "video/mp4", int64(len(data)), 300*time.Second)
		if err != nil {
			t.Fatalf("PresignPut: %v", err)
		}
		if headers["Content-Type"] != "video/mp4" || headers["Content-Length"] != strconv.Itoa(len(data)) {
			t.Errorf("headers = %v, want Content-Type video/mp4 and Content-Length %d", headers, len(data))
		}
		put := func(body []byte, change map[string]string) int {
			t.Helper()
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, putURL, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			for k, v := range change {
				if v == "" {
					req.Header.Del(k)
				} else {
					req.Header.Set(k, v)
				}
			}
			req.ContentLength = int64(len(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
			return resp.StatusCode
		}
		if code := put(data, map[string]string{"Content-Type": "image/png"}); code != http.StatusForbidden {
			t.Errorf("PUT with another Content-Type: status %d, want 403", code)
		}
		if code := put(data, map[string]string{"Content-Type": ""}); code != http.StatusForbidden {
			t.Errorf("PUT without Content-Type: status %d, want 403", code)
		}
		if code := put(data[:len(data)-1], nil); code != http.StatusForbidden {
			t.Errorf("PUT with a shorter Content-Length: status %d, want 403", code)
		}
		if code := put(append(bytes.Clone(data), 0), nil); code != http.StatusForbidden {
			t.Errorf("PUT with a longer Content-Length: status %d, want 403", code)
		}
		if _, _, err := store.ReadHead(ctx, key, 1); !errors.Is(err, media.ErrNotFound) {
			t.Errorf("after refused PUTs: ReadHead = %v, want ErrNotFound", err)
		}
		if code := put(data, nil); code != http.StatusOK {
			t.Fatalf("PUT with the signed headers: status %d, want 200", code)
		}
		kind, info, err := media.Inspect(ctx, store, key, nil)
		if err != nil || kind.MIME != "video/mp4" || info.Size != int64(len(data)) {
			t.Errorf("Inspect after direct upload = %+v, %+v, %v", kind, info, err)
		}
		anon, err := http.Get(cfg.Endpoint + "/" + cfg.Bucket + "/" + key + "?X-Amz-Signature=forged")
		if err == nil {
			anon.Body.Close()
			if anon.StatusCode != http.StatusForbidden && anon.StatusCode != http.StatusBadRequest {
				t.Errorf("forged GET: status %d, want 403 or 400", anon.StatusCode)
			}
		}
	})

	t.Run("presign needs size and type", func(t *testing.T) {
		if _, _, err := store.PresignPut(ctx, "a.png", "image/png", 0, time.Minute); err == nil {
			t.Errorf("PresignPut(size 0) succeeded")
		}
		if _, _, err := store.PresignPut(ctx, "../a.png", "image/png", 10, time.Minute); !errors.Is(err, media.ErrInvalidKey) {
			t.Errorf("PresignPut(bad key) = %v, want ErrInvalidKey", err)
		}
	})
}

func TestS3WrongCredentials(t *testing.T) {
	_, cfg := newS3(t)
	cfg.SecretKey = "wrong-secret"
	store, err := media.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = store.Put(context.Background(), "x.png", strings.NewReader("x"), 1, "image/png")
	if err == nil || errors.Is(err, media.ErrNotFound) {
		t.Errorf("Put with a wrong secret = %v, want an authorisation error", err)
	}
}

func TestS3Ingest50MBMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads 50 MB")
	}
	store, _ := newS3(t)
	ctx := context.Background()
	var obj media.Object
	var err error
	peak, allocated := media.HeapPeak(func() {
		obj, err = media.Ingest(ctx, store, "uploads/u/w", media.NewStream(media.SampleMP4(), media.MaxVideoSize), media.IngestOptions{})
	})
	if err != nil || obj.Size != media.MaxVideoSize {
		t.Fatalf("Ingest = %+v, %v; want a 50 MB mp4", obj, err)
	}
	t.Logf("50 MB ingest to S3: peak heap growth %d KiB, %d KiB allocated in all", peak>>10, allocated>>10)
	if peak > 16<<20 {
		t.Errorf("peak heap growth %d bytes during a 50 MB S3 ingest, want under 16 MB", peak)
	}
	if _, info, err := media.Inspect(ctx, store, obj.Key, nil); err != nil || info.Size != media.MaxVideoSize {
		t.Errorf("Inspect = %+v, %v", info, err)
	}
}
