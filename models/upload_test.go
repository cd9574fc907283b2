package models_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"studio/models"
	"studio/models/media"
)

func TestCheckWorkspaceID(t *testing.T) {
	cases := []struct {
		ws string
		ok bool
	}{
		{"", true},
		{"ws1", true},
		{"Campaign_2026-a", true},
		{strings.Repeat("w", 64), true},
		{strings.Repeat("w", 65), false},
		{"a/b", false},
		{"..", false},
		{".hidden", false},
		{"a b", false},
		{"ümlaut", false},
		{"a%2Fb", false},
	}
	for _, c := range cases {
		if err := models.CheckWorkspaceID(c.ws); (err == nil) != c.ok {
			t.Errorf("CheckWorkspaceID(%q) = %v, want ok %v", c.ws, err, c.ok)
		}
	}
}

// presigningStore is a local store that also presigns, with a fixed answer or error.
type presigningStore struct {
	*media.Local
	err error
}

func (s presigningStore) PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (string, map[string]string, error) {
	if s.err != nil {
		return "", nil, s.err
	}
	return "https://store.example/" + key + "?signed", map[string]string{"Content-Type": contentType, "Content-Length": "n"}, nil
}

func newLocalStore(t *testing.T) *media.Local {
	t.Helper()
	st, err := media.NewLocal(t.TempDir(), "http://cdn.example/media")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestUploadFileStoresByDetectedTypeAndCounts(t *testing.T) {
	app := newApp(t)
	app.Config.UploadRate = 2
	ctx := context.Background()
	store := newLocalStore(t)
	user := newUser(t, app, 0)
	img := pngBytes(t)

	up, err := app.Uploads().UploadFile(ctx, store, user, "ws", bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	wantPrefix := "uploads/user-" + user.UserID + "/ws/"
	if !strings.HasPrefix(up.Key, wantPrefix) || !strings.HasSuffix(up.Key, ".png") || up.URL != store.URL(up.Key) ||
		up.MediaType != "image" || up.MIME != "image/png" || up.Size != int64(len(img)) || !up.Committed ||
		up.OwnerKind != "user" || up.OwnerID != user.UserID || up.TenantID != nil {
		t.Fatalf("upload = %+v", up)
	}
	if _, err := app.Uploads().UploadFile(ctx, store, user, "", strings.NewReader("plain text")); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("text: got %v, want invalid", err)
	}
	if _, err := app.Uploads().UploadFile(ctx, store, user, "a/b", bytes.NewReader(img)); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("bad workspace: got %v, want invalid", err)
	}
	if _, err := app.Uploads().UploadFile(ctx, store, user, "", bytes.NewReader(img)); err != nil {
		t.Fatalf("second upload: %v", err)
	}
	_, err = app.Uploads().UploadFile(ctx, store, user, "", bytes.NewReader(img))
	var e *models.Error
	if !errors.As(err, &e) || e.Kind != models.KindRateLimited || e.RetryAfter <= 0 {
		t.Fatalf("third upload: got %v, want rate limited with a retry time", err)
	}
	var n int64
	app.DB.Gorm.Model(&models.Upload{}).Count(&n)
	if n != 2 {
		t.Fatalf("rows = %d, want 2", n)
	}
}

func TestUploadFileTooLargeNamesTheLimit(t *testing.T) {
	app := newApp(t)
	store := newLocalStore(t)
	tenant := newTenant(t, app, models.TenantInput{})
	big := make([]byte, media.MaxImageSize+1)
	copy(big, pngBytes(t))
	_, err := app.Uploads().UploadFile(context.Background(), store, tenant, "", bytes.NewReader(big))
	if models.KindOf(err) != models.KindTooLarge || !strings.Contains(err.Error(), "8 MB (8388608 bytes)") {
		t.Fatalf("got %v, want too large naming 8 MB", err)
	}
}

func TestPresignUploadStrategies(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	local := newLocalStore(t)
	tenant := newTenant(t, app, models.TenantInput{})
	size := func(n int64) *int64 { return &n }

	cases := []struct {
		name     string
		store    media.Store
		req      models.PresignRequest
		kind     models.Kind // the error expected when strategy is empty
		strategy string
		reason   string
	}{
		{"no presigner", local, models.PresignRequest{Ext: "mp4", Size: size(10 << 20)}, 0, models.StrategyProxy, models.ProxyNotConfigured},
		{"too small", presigningStore{Local: local}, models.PresignRequest{Ext: "png", Size: size(1<<20 - 1)}, 0, models.StrategyProxy, models.ProxyTooSmall},
		{"presign fails", presigningStore{Local: local, err: errors.New("signer down")}, models.PresignRequest{Ext: "png", Size: size(2 << 20)}, 0, models.StrategyProxy, models.ProxyPresignFailed},
		{"direct", presigningStore{Local: local}, models.PresignRequest{Ext: ".JPEG", Size: size(2 << 20), WorkspaceID: "w"}, 0, models.StrategyDirect, ""},
		{"unknown ext", presigningStore{Local: local}, models.PresignRequest{Ext: "svg", Size: size(2 << 20)}, models.KindInvalid, "", ""},
		{"no size", presigningStore{Local: local}, models.PresignRequest{Ext: "png"}, models.KindInvalid, "", ""},
		{"negative size", presigningStore{Local: local}, models.PresignRequest{Ext: "png", Size: size(-1)}, models.KindInvalid, "", ""},
		{"over the limit", presigningStore{Local: local}, models.PresignRequest{Ext: "mp3", Size: size(20<<20 + 1)}, models.KindTooLarge, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := app.Uploads().PresignUpload(ctx, c.store, tenant, c.req)
			if c.strategy == "" {
				if models.KindOf(err) != c.kind {
					t.Fatalf("got %v, want kind %s", err, c.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Strategy != c.strategy || p.Reason != c.reason {
				t.Fatalf("got %s/%s, want %s/%s", p.Strategy, p.Reason, c.strategy, c.reason)
			}
		})
	}
	var rows []models.Upload
	app.DB.Gorm.Find(&rows)
	if len(rows) != 1 || rows[0].Committed || rows[0].MIME != "image/jpeg" || rows[0].Size != 2<<20 ||
		!strings.HasPrefix(rows[0].Key, "uploads/tenant-"+tenant.TenantID+"/w/") || !strings.HasSuffix(rows[0].Key, ".jpg") {
		t.Fatalf("rows = %+v, want one pending jpeg", rows)
	}
}

func TestCommitUploadChecksTheStoredObject(t *testing.T) {
	app := newApp(t)
	ctx := context.Background()
	local := newLocalStore(t)
	store := presigningStore{Local: local}
	tenant := newTenant(t, app, models.TenantInput{})
	other := newTenant(t, app, models.TenantInput{Name: "Other"})
	img := make([]byte, 1<<20)
	copy(img, pngBytes(t))
	presign := func(ext string) string {
		t.Helper()
		n := int64(len(img))
		p, err := app.Uploads().PresignUpload(ctx, store, tenant, models.PresignRequest{Ext: ext, Size: &n})
		if err != nil || p.Strategy != models.StrategyDirect {
			t.Fatalf("presign: %+v %v", p, err)
		}
		return p.Key
	}
	putObject := func(key string, data []byte) {
		t.Helper()
		if err := local.Put(ctx, key, bytes.NewReader(data), int64(len(data)), ""); err != nil {
			t.Fatal(err)
		}
	}

	key := presign("png")
	if _, err := app.Uploads().CommitUpload(ctx, store, tenant, key); models.KindOf(err) != models.KindInvalid {
		t.Fatalf("commit before the PUT: got %v, want invalid", err)
	}
	putObject(key, img)
	if _, err := app.Uploads().CommitUpload(ctx, store, other, key); models.KindOf(err) != models.KindNotFound {
		t.Fatalf("commit by another tenant: got %v, want not found", err)
	}
	up, err := app.Uploads().CommitUpload(ctx, store, tenant, key)
	if err != nil || !up.Committed || up.MIME != "image/png" || up.URL != local.URL(key) {
		t.Fatalf("commit: %+v %v", up, err)
	}
	if again, err := app.Uploads().CommitUpload(ctx, store, tenant, key); err != nil || again.ID != up.ID {
		t.Fatalf("second commit: %+v %v", again, err)
	}

	for name, data := range map[string][]byte{
		"another type": append([]byte("GIF89a"), img[6:]...),
		"another size": img[:len(img)-1],
		"unrecognised": make([]byte, len(img)),
	} {
		t.Run(name, func(t *testing.T) {
			key := presign("png")
			putObject(key, data)
			_, err := app.Uploads().CommitUpload(ctx, store, tenant, key)
			if models.KindOf(err) != models.KindInvalid || !strings.Contains(err.Error(), "does not match") {
				t.Fatalf("got %v, want a mismatch", err)
			}
			if _, _, err := local.ReadHead(ctx, key, 1); !errors.Is(err, media.ErrNotFound) {
				t.Fatalf("object after a refused commit: %v", err)
			}
			if _, err := app.Uploads().CommitUpload(ctx, store, tenant, key); models.KindOf(err) != models.KindNotFound {
				t.Fatalf("commit after a refusal: got %v, want not found", err)
			}
		})
	}
}

func TestPresignIssuesAtMostTwiceTheUploadRate(t *testing.T) {
	app := newApp(t)
	app.Config.UploadRate = 1
	ctx := context.Background()
	store := presigningStore{Local: newLocalStore(t)}
	user := newUser(t, app, 0)
	small, large := int64(1000), int64(2<<20)
	for i := range 3 {
		// Proxy answers count nothing.
		if p, err := app.Uploads().PresignUpload(ctx, store, user, models.PresignRequest{Ext: "png", Size: &small}); err != nil || p.Reason != models.ProxyTooSmall {
			t.Fatalf("small presign %d: %+v %v", i, p, err)
		}
	}
	for i := range 2 {
		if p, err := app.Uploads().PresignUpload(ctx, store, user, models.PresignRequest{Ext: "png", Size: &large}); err != nil || p.Strategy != models.StrategyDirect {
			t.Fatalf("presign %d: %+v %v", i, p, err)
		}
	}
	if _, err := app.Uploads().PresignUpload(ctx, store, user, models.PresignRequest{Ext: "png", Size: &large}); models.KindOf(err) != models.KindRateLimited {
		t.Fatalf("third direct presign with an upload rate of 1: got %v, want rate limited", err)
	}
}
