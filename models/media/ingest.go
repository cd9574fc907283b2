package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
)

// IngestOptions tunes Ingest.
type IngestOptions struct {
	// Detect decides the format from the leading bytes; nil means Detect.
	Detect func(head []byte) (Kind, error)
	// MaxSize, when positive, replaces the detected format's size limit.
	MaxSize int64
	// Size, when positive, is the declared length of the stream; a longer or shorter stream fails.
	Size int64
	// Name is the file name without extension; empty means a new random UUID.
	Name string
}

// Object is a stored media file.
type Object struct {
	Key  string
	URL  string
	Kind Kind
	Size int64
}

// Ingest detects the format of r from its leading bytes, then streams it to store under
// keyPrefix/<name><ext>, failing with ErrTooLarge as soon as the limit is passed and storing nothing then.
func Ingest(ctx context.Context, store Store, keyPrefix string, r io.Reader, opts IngestOptions) (Object, error) {
	name := opts.Name
	if name == "" {
		name = uuid.NewString()
	}
	head, err := readHead(r)
	if err != nil {
		return Object{}, err
	}
	kind, err := detectWith(opts.Detect, head)
	if err != nil {
		return Object{}, err
	}
	limit := kind.MaxSize
	if opts.MaxSize > 0 {
		limit = opts.MaxSize
	}
	if opts.Size > limit || int64(len(head)) > limit {
		return Object{}, fmt.Errorf("%w: limit %d bytes", ErrTooLarge, limit)
	}
	key := name + kind.Ext
	if keyPrefix != "" {
		key = keyPrefix + "/" + key
	}
	if err := CheckKey(key); err != nil {
		return Object{}, err
	}
	size := int64(-1)
	if opts.Size > 0 {
		size = opts.Size
	}
	body := &limitedReader{r: io.MultiReader(bytes.NewReader(head), r), max: limit}
	if err := store.Put(ctx, key, body, size, kind.MIME); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return Object{}, fmt.Errorf("%w: limit %d bytes", ErrTooLarge, limit)
		}
		return Object{}, err
	}
	return Object{Key: key, URL: store.URL(key), Kind: kind, Size: body.n}, nil
}

// Inspect re-detects a stored object from its leading bytes and checks its true size against
// the format's limit (spec 4.11 commit step); detect nil means Detect.
func Inspect(ctx context.Context, store Store, key string, detect func(head []byte) (Kind, error)) (Kind, Info, error) {
	head, info, err := store.ReadHead(ctx, key, HeadSize)
	if err != nil {
		return Kind{}, Info{}, err
	}
	kind, err := detectWith(detect, head)
	if err != nil {
		return Kind{}, info, err
	}
	if info.Size > kind.MaxSize {
		return kind, info, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, info.Size, kind.MaxSize)
	}
	return kind, info, nil
}

// ReadAll reads a whole small file into memory after deciding its format from the leading bytes,
// failing with ErrTooLarge past the format's limit; detect nil means Detect.
func ReadAll(r io.Reader, detect func(head []byte) (Kind, error)) ([]byte, Kind, error) {
	head, err := readHead(r)
	if err != nil {
		return nil, Kind{}, err
	}
	kind, err := detectWith(detect, head)
	if err != nil {
		return nil, Kind{}, err
	}
	data, err := io.ReadAll(&limitedReader{r: io.MultiReader(bytes.NewReader(head), r), max: kind.MaxSize})
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, kind, fmt.Errorf("%w: limit %d bytes", ErrTooLarge, kind.MaxSize)
		}
		return nil, kind, fmt.Errorf("media: read: %w", err)
	}
	return data, kind, nil
}

func detectWith(detect func([]byte) (Kind, error), head []byte) (Kind, error) {
	if detect == nil {
		detect = Detect
	}
	return detect(head)
}

// readHead reads up to HeadSize leading bytes; a shorter stream is fine.
func readHead(r io.Reader) ([]byte, error) {
	head := make([]byte, HeadSize)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("media: read: %w", err)
	}
	return head[:n], nil
}

// limitedReader fails with ErrTooLarge once more than max bytes come from r.
type limitedReader struct {
	r   io.Reader
	max int64
	n   int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n > l.max {
		return 0, ErrTooLarge
	}
	// Ask for at most one byte past the limit, so an oversized stream is noticed without reading far beyond it.
	if rest := l.max - l.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.max {
		return 0, ErrTooLarge
	}
	return n, err
}
