// Package media stores uploaded and generated media, decides file types from their bytes,
// ingests uploads within size limits, and fetches remote URLs without reaching private networks.
//
// It knows nothing of the rest of the application: callers pass keys, readers and limits.
package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// Errors callers can test with errors.Is.
var (
	// ErrUnsupportedType means the leading bytes are not one of the accepted formats (HTTP 400).
	ErrUnsupportedType = errors.New("media: unsupported file type")
	// ErrTooLarge means the file passed its size limit (HTTP 413).
	ErrTooLarge = errors.New("media: file too large")
	// ErrNotFound means no object is stored under the key.
	ErrNotFound = errors.New("media: not found")
	// ErrInvalidKey means a key or key segment could escape its folder or holds unsafe characters.
	ErrInvalidKey = errors.New("media: invalid key")
	// ErrSizeMismatch means a stream was shorter or longer than its declared size.
	ErrSizeMismatch = errors.New("media: size does not match")
	// ErrInvalidURL means a URL is malformed or not http or https.
	ErrInvalidURL = errors.New("media: invalid URL")
	// ErrBlockedAddress means a connection to a loopback, private or other special address was refused.
	ErrBlockedAddress = errors.New("media: address not allowed (loopback, private or special; SERVICE_ALLOW_PRIVATE_URLS=true allows loopback and private addresses)")
	// ErrFetchStatus means a fetched URL answered with a non-2xx status.
	ErrFetchStatus = errors.New("media: fetch returned an error status")
)

// Store keeps media objects under keys and serves them at public URLs.
//
// Put stores nothing when it fails: a reader error (such as ErrTooLarge) leaves no object behind.
type Store interface {
	// Put stores the bytes of r under key; size is the exact length, or -1 when unknown.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	// Open returns the object's bytes and information, or ErrNotFound.
	Open(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// ReadHead returns up to n leading bytes and the object's information, or ErrNotFound.
	ReadHead(ctx context.Context, key string, n int) ([]byte, Info, error)
	// Delete removes the object; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// URL returns the public URL of key.
	URL(key string) string
	// KeyFromURL returns the key of one of this store's own public URLs.
	KeyFromURL(rawURL string) (key string, ok bool)
}

// ParallelPuts is implemented by stores that know how many Puts are worth running at once; callers that
// write many objects in the background (the job workers) run at most that many. A store that does not
// say is written to by a handful of callers at once.
type ParallelPuts interface {
	ParallelPuts() int
}

// Presigner issues URLs that let a client upload one object directly to the store.
type Presigner interface {
	// PresignPut returns a PUT URL and the exact headers to send; the signature covers Content-Type and Content-Length.
	PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (url string, headers map[string]string, err error)
}

// Info describes a stored object.
type Info struct {
	Size        int64
	ContentType string
	ModTime     time.Time
	ETag        string
}

const maxKeyLen = 512

// CheckKey reports whether key is a safe object key: slash-separated segments of
// letters, digits, '.', '_' and '-', none empty or starting with a dot.
func CheckKey(key string) error {
	if key == "" || len(key) > maxKeyLen {
		return fmt.Errorf("%w: length %d", ErrInvalidKey, len(key))
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}

// JoinKey joins segments into a key, refusing any segment that is empty, starts with a dot or holds other characters.
func JoinKey(segments ...string) (string, error) {
	for _, seg := range segments {
		if err := checkSegment(seg); err != nil {
			return "", fmt.Errorf("%w: segment %q", ErrInvalidKey, seg)
		}
	}
	key := strings.Join(segments, "/")
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return key, nil
}

func checkSegment(seg string) error {
	if seg == "" || seg[0] == '.' || len(seg) > 255 {
		return ErrInvalidKey
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ErrInvalidKey
		}
	}
	return nil
}

// publicBase is the public URL prefix of a store.
type publicBase struct {
	raw string
	u   *url.URL
}

func parsePublicURL(raw string) (publicBase, error) {
	raw = strings.TrimRight(strings.TrimSpace(raw), "/")
	if raw == "" {
		return publicBase{}, errors.New("media: public URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return publicBase{}, fmt.Errorf("media: public URL %q: %w", raw, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return publicBase{}, fmt.Errorf("media: public URL %q: query, fragment or user info not allowed", raw)
	}
	if u.Host == "" && !strings.HasPrefix(raw, "/") {
		return publicBase{}, fmt.Errorf("media: public URL %q: want an absolute URL or a path", raw)
	}
	return publicBase{raw: raw, u: u}, nil
}

func (b publicBase) url(key string) string {
	return b.raw + "/" + key
}

func (b publicBase) keyFromURL(raw string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.User != nil {
		return "", false
	}
	if !strings.EqualFold(u.Scheme, b.u.Scheme) || !strings.EqualFold(u.Host, b.u.Host) {
		return "", false
	}
	key, ok := strings.CutPrefix(u.EscapedPath(), b.u.EscapedPath()+"/")
	if !ok || CheckKey(key) != nil {
		return "", false
	}
	return key, true
}

// ctxReader stops reading once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
