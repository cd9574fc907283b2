package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"time"

	"gorm.io/gorm"

	"studio/models/media"
)

// Rules of uploads (spec 4.11 and section 8).
const (
	// DirectUploadMinSize is the smallest declared size for which presign offers a direct upload (1 MB);
	// smaller files are cheaper to post to POST /api/upload-ref.
	DirectUploadMinSize int64 = 1 << 20
	// PresignTTL is how long a presigned PUT URL is valid.
	PresignTTL = 300 * time.Second
	// MaxWorkspaceIDLen is the longest accepted workspace_id.
	MaxWorkspaceIDLen = 64
)

// Presign strategies and the reasons of the proxy strategy (spec 4.11).
const (
	StrategyDirect = "direct"
	StrategyProxy  = "proxy"

	// ProxyNotConfigured: the media store cannot presign uploads (no S3-compatible store).
	ProxyNotConfigured = "not_configured"
	// ProxyTooSmall: the declared size is under DirectUploadMinSize.
	ProxyTooSmall = "too_small"
	// ProxyPresignFailed: the store refused or failed to presign.
	ProxyPresignFailed = "presign_failed"
	// ProxyNotCN is reserved for a region rule; the service has none, so it never answers it.
	ProxyNotCN = "not_cn"
)

// Rate-limit counters of uploads (rateLimitTx kinds).
const (
	rateUpload  = "upload"
	ratePresign = "presign"
)

// errRollback ends a transaction on purpose without it being a failure.
var errRollback = errors.New("rollback")

// CheckWorkspaceID accepts an empty workspace or 1 to 64 letters, digits, '-' and '_'.
func CheckWorkspaceID(ws string) error {
	if len(ws) > MaxWorkspaceIDLen {
		return Invalid("workspace_id is too long: at most %d characters", MaxWorkspaceIDLen)
	}
	for i := 0; i < len(ws); i++ {
		c := ws[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return Invalid("workspace_id may hold only letters, digits, '-' and '_'")
		}
	}
	return nil
}

// MayUpload answers whether the identity may upload files (403 when not), before the surface reads an
// upload's body: a refused caller's file is never streamed to the store. UploadFile checks again.
func (ups *UploadService) MayUpload(id *Identity) error { return id.Require(CapGenerate) }

// uploadOwner returns the owner columns of an upload by the identity.
func uploadOwner(id *Identity) (kind, ownerID string, err error) {
	switch id.Kind {
	case IdentityTenant:
		return string(id.Kind), id.TenantID, nil
	case IdentityAccount:
		return string(id.Kind), id.AccountID, nil
	case IdentityUser:
		return string(id.Kind), id.UserID, nil
	}
	return "", "", Forbidden("this identity cannot upload files")
}

// uploadPrefix returns the key folder of the identity's uploads: uploads/<kind>-<id>[/<workspace>].
func uploadPrefix(id *Identity, workspace string) (string, error) {
	if err := CheckWorkspaceID(workspace); err != nil {
		return "", err
	}
	kind, ownerID, err := uploadOwner(id)
	if err != nil {
		return "", err
	}
	segments := []string{"uploads", kind + "-" + ownerID}
	if workspace != "" {
		segments = append(segments, workspace)
	}
	prefix, err := media.JoinKey(segments...)
	if err != nil {
		return "", Internal("upload: key", err)
	}
	return prefix, nil
}

// newUploadRow returns an upload row of the identity for a stored or presigned object.
func newUploadRow(id *Identity, store media.Store, key string, kind media.Kind, size int64, committed bool, now time.Time) *Upload {
	ownerKind, ownerID, _ := uploadOwner(id)
	u := &Upload{ID: NewID(), OwnerKind: ownerKind, OwnerID: ownerID, Key: key, URL: store.URL(key),
		MediaType: string(kind.Type), MIME: kind.MIME, Size: size, Committed: committed, CreatedAt: now}
	if id.TenantID != "" {
		t := id.TenantID
		u.TenantID = &t
	}
	return u
}

// checkUploadRate refuses (KindRateLimited) an identity that has used up its uploads of this hour,
// without counting anything: the counter runs in a transaction that is always rolled back.
// The authoritative count happens when the file is recorded.
func (a *App) checkUploadRate(ctx context.Context, id *Identity) error {
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.rateLimitTx(tx, id, rateUpload, 1, a.Config.UploadRate); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return asCoreError("upload: rate limit", err)
}

// tooLarge is the refusal of a file over its format's limit.
func tooLarge(kind media.Kind, cause error) error {
	return &Error{Kind: KindTooLarge, Err: cause, Message: fmt.Sprintf(
		"file too large: %s files (%s) may be at most %d MB (%d bytes)",
		kind.Type, strings.TrimPrefix(kind.Ext, "."), kind.MaxSize>>20, kind.MaxSize)}
}

// UploadFile stores one uploaded file for the identity (spec 4.11): the type comes from the leading
// bytes only, the file is streamed to the store under its detected extension and refused (KindTooLarge)
// as soon as it passes its format's limit, and it counts toward the hourly upload limit once stored.
// A caller over the limit is refused before anything is read from r.
func (ups *UploadService) UploadFile(ctx context.Context, store media.Store, id *Identity, workspace string, r io.Reader) (*Upload, error) {
	a := ups.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	prefix, err := uploadPrefix(id, workspace)
	if err != nil {
		return nil, err
	}
	if err := a.checkUploadRate(ctx, id); err != nil {
		return nil, err
	}
	var kind media.Kind
	detect := func(head []byte) (media.Kind, error) {
		k, err := media.Detect(head)
		kind = k
		return k, err
	}
	obj, err := media.Ingest(ctx, store, prefix, r, media.IngestOptions{Detect: detect})
	switch {
	case errors.Is(err, media.ErrUnsupportedType):
		return nil, &Error{Kind: KindInvalid, Err: err, Message: "unrecognised file type: upload png, jpg, webp, gif, mp3, wav, m4a, flac, ogg, mp4, mov or webm (the type is read from the file's bytes)"}
	case errors.Is(err, media.ErrTooLarge):
		return nil, tooLarge(kind, err)
	case err != nil:
		return nil, Internal("upload: store", err)
	}
	row := newUploadRow(id, store, obj.Key, obj.Kind, obj.Size, true, a.Now())
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.rateLimitTx(tx, id, rateUpload, 1, a.Config.UploadRate); err != nil {
			return err
		}
		if err := tx.Create(row).Error; err != nil {
			return Internal("upload: record", err)
		}
		return nil
	})
	if err != nil {
		a.deleteObject(ctx, store, obj.Key)
		return nil, asCoreError("upload: record", err)
	}
	return row, nil
}

// MoveUploadToWorkspace puts an upload the identity has just stored into a workspace's subfolder, for a
// multipart body that names its workspace_id after the file: the object is copied under the workspace's
// folder with the same name, the row follows it, and the old object is removed. It returns the moved row.
func (ups *UploadService) MoveUploadToWorkspace(ctx context.Context, store media.Store, id *Identity, up *Upload, workspace string) (*Upload, error) {
	a := ups.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	prefix, err := uploadPrefix(id, workspace)
	if err != nil {
		return nil, err
	}
	key, err := media.JoinKey(append(strings.Split(prefix, "/"), path.Base(up.Key))...)
	if err != nil {
		return nil, Internal("upload: key", err)
	}
	if key == up.Key {
		return up, nil
	}
	rc, _, err := store.Open(ctx, up.Key)
	if err != nil {
		return nil, Internal("upload: open stored file", err)
	}
	err = store.Put(ctx, key, rc, up.Size, up.MIME)
	rc.Close()
	if err != nil {
		return nil, Internal("upload: store in workspace", err)
	}
	moved := *up
	moved.Key, moved.URL = key, store.URL(key)
	res := a.DB.WithContext(ctx).Model(&Upload{}).Where("id = ? AND key = ?", up.ID, up.Key).Updates(map[string]any{"key": moved.Key, "url": moved.URL})
	if res.Error != nil || res.RowsAffected != 1 {
		a.deleteObject(ctx, store, key)
		if res.Error == nil {
			return nil, NotFound("upload not found")
		}
		return nil, Internal("upload: move row", res.Error)
	}
	a.deleteObject(ctx, store, up.Key)
	return &moved, nil
}

// deleteObject removes a stored object that must not stay, logging a failure.
func (a *App) deleteObject(ctx context.Context, store media.Store, key string) {
	if err := store.Delete(context.WithoutCancel(ctx), key); err != nil {
		slog.ErrorContext(ctx, "upload: delete refused object", "key", key, "err", err)
	}
}

// RemoveUpload deletes one of the identity's uploads, its row and its object; any other is not found.
// It runs to the end even when ctx is cancelled (a request cut short still cleans up).
func (ups *UploadService) RemoveUpload(ctx context.Context, store media.Store, id *Identity, uploadID string) error {
	a := ups.a
	if err := id.Require(CapGenerate); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	u, err := a.uploadOf(ctx, id, "id = ?", uploadID)
	if err != nil {
		return err
	}
	if err := store.Delete(ctx, u.Key); err != nil {
		return Internal("upload: delete object", err)
	}
	if err := a.DB.WithContext(ctx).Delete(&Upload{}, "id = ?", u.ID).Error; err != nil {
		return Internal("upload: delete row", err)
	}
	return nil
}

// uploadOf returns the identity's own upload matching the condition; any other is not found.
func (a *App) uploadOf(ctx context.Context, id *Identity, cond string, arg any) (*Upload, error) {
	kind, ownerID, err := uploadOwner(id)
	if err != nil {
		return nil, err
	}
	var u Upload
	err = a.DB.WithContext(ctx).Where("owner_kind = ? AND owner_id = ?", kind, ownerID).Where(cond, arg).First(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, NotFound("upload")
	}
	if err != nil {
		return nil, Internal("upload: read", err)
	}
	return &u, nil
}

// PresignRequest is the body of POST /api/upload-ref/presign.
type PresignRequest struct {
	Ext         string `json:"ext"`
	Size        *int64 `json:"size"`
	WorkspaceID string `json:"workspace_id"`
}

// Presign is the answer of POST /api/upload-ref/presign: a direct upload, or the proxy strategy with its reason.
type Presign struct {
	Strategy string
	Reason   string // proxy only
	// Direct only: the object key, its format, and the signed PUT with the exact headers to send.
	Key       string
	Kind      media.Kind
	URL       string
	Headers   map[string]string
	ExpiresIn time.Duration
}

// PresignUpload validates a planned upload and, when the store can presign and the file is large enough,
// returns a signed PUT URL for it (valid PresignTTL) and records a pending upload that only the caller
// may commit. Otherwise it answers the proxy strategy with its reason.
//
// A declared size over the format's limit is KindTooLarge (413), like an upload over the limit. The
// upload counts toward the hourly limit at commit; presign only refuses a caller already over it, and
// presigned URLs are limited separately to twice the upload limit per hour so pending rows stay bounded.
func (ups *UploadService) PresignUpload(ctx context.Context, store media.Store, id *Identity, req PresignRequest) (*Presign, error) {
	a := ups.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	kind, ok := media.KindByExt(req.Ext)
	if !ok {
		return nil, Invalid("ext must be one of png, jpg, webp, gif, mp3, wav, m4a, flac, ogg, mp4, mov, webm")
	}
	if req.Size == nil || *req.Size <= 0 {
		return nil, Invalid("size must be the file's exact size in bytes, a positive integer")
	}
	size := *req.Size
	if size > kind.MaxSize {
		return nil, tooLarge(kind, nil)
	}
	prefix, err := uploadPrefix(id, req.WorkspaceID)
	if err != nil {
		return nil, err
	}
	presigner, ok := store.(media.Presigner)
	switch {
	case !ok:
		return &Presign{Strategy: StrategyProxy, Reason: ProxyNotConfigured}, nil
	case size < DirectUploadMinSize:
		return &Presign{Strategy: StrategyProxy, Reason: ProxyTooSmall}, nil
	}
	if err := a.checkUploadRate(ctx, id); err != nil {
		return nil, err
	}
	key := prefix + "/" + NewID() + kind.Ext
	url, headers, err := presigner.PresignPut(ctx, key, kind.MIME, size, PresignTTL)
	if err != nil {
		slog.WarnContext(ctx, "upload: presign failed", "key", key, "err", err)
		return &Presign{Strategy: StrategyProxy, Reason: ProxyPresignFailed}, nil
	}
	row := newUploadRow(id, store, key, kind, size, false, a.Now())
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.rateLimitTx(tx, id, ratePresign, 1, 2*a.Config.UploadRate); err != nil {
			return err
		}
		if err := tx.Create(row).Error; err != nil {
			return Internal("upload: record presign", err)
		}
		// The column defaults to true, and GORM writes a field's default in place of its zero value.
		if err := tx.Model(&Upload{}).Where("id = ?", row.ID).Update("committed", false).Error; err != nil {
			return Internal("upload: record presign", err)
		}
		row.Committed = false
		return nil
	})
	if err != nil {
		return nil, asCoreError("upload: presign", err)
	}
	return &Presign{Strategy: StrategyDirect, Key: key, Kind: kind, URL: url, Headers: headers, ExpiresIn: PresignTTL}, nil
}

// CommitUpload finishes a direct upload (spec 4.11): it re-reads the leading bytes and the true size of
// the caller's pending key from the store, and on a type or size mismatch with the presign deletes the
// object and the pending row (KindInvalid). On success the upload counts toward the hourly limit and is
// committed; committing an already committed key of the caller again returns it unchanged.
// A key of anyone else, or unknown, is not found.
func (ups *UploadService) CommitUpload(ctx context.Context, store media.Store, id *Identity, key string) (*Upload, error) {
	a := ups.a
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, Invalid("key is required: the key returned by POST /api/upload-ref/presign")
	}
	u, err := a.uploadOf(ctx, id, "key = ?", key)
	if err != nil {
		return nil, err
	}
	if u.Committed {
		return u, nil
	}
	kind, info, err := media.Inspect(ctx, store, key, nil)
	switch {
	case errors.Is(err, media.ErrNotFound):
		return nil, Invalid("nothing was uploaded under this key yet: PUT the file to upload.url first, or post it to /api/upload-ref")
	case errors.Is(err, media.ErrUnsupportedType), errors.Is(err, media.ErrTooLarge):
		// Handled below as a mismatch: an unrecognised or oversized object is never what was presigned.
	case err != nil:
		return nil, Internal("upload: inspect", err)
	}
	if err != nil || kind.MIME != u.MIME || info.Size != u.Size {
		if derr := a.discardPending(ctx, store, u); derr != nil {
			return nil, derr
		}
		got := "an unrecognised type"
		if kind.MIME != "" {
			got = kind.MIME
		}
		return nil, &Error{Kind: KindInvalid, Err: err, Message: fmt.Sprintf(
			"the uploaded file does not match the presign: got %s, %d bytes; presigned %s, %d bytes. Nothing was stored",
			got, info.Size, u.MIME, u.Size)}
	}
	err = a.Tx(ctx, func(tx *gorm.DB) error {
		if err := a.rateLimitTx(tx, id, rateUpload, 1, a.Config.UploadRate); err != nil {
			return err
		}
		res := tx.Model(&Upload{}).Where("id = ? AND committed = ?", u.ID, false).Update("committed", true)
		if res.Error != nil {
			return Internal("upload: commit", res.Error)
		}
		if res.RowsAffected == 0 {
			// A concurrent commit of the same key won; it counted the upload.
			return errRollback
		}
		return nil
	})
	if err != nil && !errors.Is(err, errRollback) {
		return nil, asCoreError("upload: commit", err)
	}
	u.Committed = true
	return u, nil
}

// discardPending deletes a refused direct upload: its object first, then its pending row.
func (a *App) discardPending(ctx context.Context, store media.Store, u *Upload) error {
	ctx = context.WithoutCancel(ctx)
	if err := store.Delete(ctx, u.Key); err != nil {
		return Internal("upload: delete refused object", err)
	}
	if err := a.DB.WithContext(ctx).Delete(&Upload{}, "id = ? AND committed = ?", u.ID, false).Error; err != nil {
		return Internal("upload: delete pending row", err)
	}
	return nil
}

// UploadService holds the files tenants upload into their workspaces.
type UploadService struct{ a *App }

// Uploads returns the uploads.
func (a *App) Uploads() *UploadService { return a.svc.uploads }
