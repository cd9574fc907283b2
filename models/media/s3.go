package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3Config locates an S3-compatible bucket (the SERVICE_S3_* settings of D2).
type S3Config struct {
	// Endpoint is the server URL such as http://127.0.0.1:7070; empty means AWS itself.
	Endpoint string
	Bucket   string
	// Region defaults to us-east-1.
	Region    string
	AccessKey string
	SecretKey string
	// PublicURL is where objects are publicly readable; empty means Endpoint/Bucket.
	PublicURL string
	// TempDir holds the spool files of uploads of unknown length (created when missing); empty means os.TempDir().
	TempDir string
}

// S3 is a Store and Presigner on an S3-compatible bucket.
type S3 struct {
	client  *s3.Client
	presign *s3.PresignClient
	bucket  string
	region  string
	base    publicBase
	tempDir string
}

var (
	_ Store     = (*S3)(nil)
	_ Presigner = (*S3)(nil)
)

// NewS3 returns a store on the configured bucket, with path-style addressing when Endpoint is set.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("media: s3: bucket is required")
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("media: s3: access key and secret key are required")
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	endpoint := strings.TrimRight(cfg.Endpoint, "/")
	publicURL := cfg.PublicURL
	if publicURL == "" {
		if endpoint == "" {
			publicURL = "https://" + cfg.Bucket + ".s3." + region + ".amazonaws.com"
		} else {
			publicURL = endpoint + "/" + cfg.Bucket
		}
	}
	base, err := parsePublicURL(publicURL)
	if err != nil {
		return nil, err
	}
	if cfg.TempDir != "" {
		if err := os.MkdirAll(cfg.TempDir, 0o755); err != nil {
			return nil, fmt.Errorf("media: s3: create temporary directory %s: %w", cfg.TempDir, err)
		}
	}
	creds := aws.Credentials{AccessKeyID: cfg.AccessKey, SecretAccessKey: cfg.SecretKey, Source: "studio"}
	opts := s3.Options{
		Region: region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return creds, nil
		}),
		// S3-compatible servers vary in their support of the newer default checksums.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("media: s3: invalid endpoint %q", cfg.Endpoint)
		}
		opts.BaseEndpoint = aws.String(endpoint)
		opts.UsePathStyle = true
	}
	client := s3.New(opts)
	return &S3{
		client:  client,
		presign: s3.NewPresignClient(client),
		bucket:  cfg.Bucket,
		region:  region,
		base:    base,
		tempDir: cfg.TempDir,
	}, nil
}

// EnsureBucket creates the bucket when it does not exist yet.
func (s *S3) EnsureBucket(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return fmt.Errorf("media: s3: head bucket %s: %w", s.bucket, err)
	}
	in := &s3.CreateBucketInput{Bucket: &s.bucket}
	if s.region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(s.region),
		}
	}
	if _, err := s.client.CreateBucket(ctx, in); err != nil {
		return fmt.Errorf("media: s3: create bucket %s: %w", s.bucket, err)
	}
	return nil
}

// Put uploads r under key; a reader of unknown length or without Seek is first spooled to a temporary
// file, so memory stays bounded and a failing reader uploads nothing.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	body, ok := r.(io.ReadSeeker)
	if !ok || size < 0 {
		f, n, err := s.spool(ctx, r, size)
		if err != nil {
			return fmt.Errorf("media: put %s: %w", key, err)
		}
		defer func() {
			f.Close()
			os.Remove(f.Name())
		}()
		body, size = f, n
	}
	in := &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &key,
		Body:          body,
		ContentLength: aws.Int64(size),
	}
	if contentType != "" {
		in.ContentType = &contentType
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		return fmt.Errorf("media: put %s: %w", key, err)
	}
	return nil
}

// spool copies r to a temporary file and rewinds it.
func (s *S3) spool(ctx context.Context, r io.Reader, size int64) (*os.File, int64, error) {
	f, err := os.CreateTemp(s.tempDir, "studio-media-*")
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*os.File, int64, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, err
	}
	src := io.Reader(ctxReader{ctx, r})
	if size >= 0 {
		src = io.LimitReader(src, size+1)
	}
	n, err := io.Copy(struct{ io.Writer }{f}, src)
	if err != nil {
		return fail(err)
	}
	if size >= 0 && n != size {
		return fail(fmt.Errorf("%w: got %d bytes, want %d", ErrSizeMismatch, n, size))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	return f, n, nil
}

// Open returns the object's body; the caller closes it.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := CheckKey(key); err != nil {
		return nil, Info{}, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return nil, Info{}, s.wrap("open", key, err)
	}
	info := Info{
		Size:        aws.ToInt64(out.ContentLength),
		ContentType: aws.ToString(out.ContentType),
		ModTime:     aws.ToTime(out.LastModified),
		ETag:        aws.ToString(out.ETag),
	}
	return out.Body, info, nil
}

// ReadHead fetches up to n leading bytes with a range request, and the true size from Content-Range.
func (s *S3) ReadHead(ctx context.Context, key string, n int) ([]byte, Info, error) {
	if err := CheckKey(key); err != nil {
		return nil, Info{}, err
	}
	if n <= 0 {
		info, err := s.stat(ctx, key)
		return []byte{}, info, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &s.bucket,
		Key:    &key,
		Range:  aws.String("bytes=0-" + strconv.Itoa(n-1)),
	})
	if err != nil {
		if statusOf(err) == http.StatusRequestedRangeNotSatisfiable {
			// An empty object has no byte 0.
			info, err := s.stat(ctx, key)
			return []byte{}, info, err
		}
		return nil, Info{}, s.wrap("read", key, err)
	}
	defer out.Body.Close()
	buf := make([]byte, n)
	m, err := io.ReadFull(out.Body, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, Info{}, fmt.Errorf("media: read %s: %w", key, err)
	}
	info := Info{
		Size:        aws.ToInt64(out.ContentLength),
		ContentType: aws.ToString(out.ContentType),
		ModTime:     aws.ToTime(out.LastModified),
		ETag:        aws.ToString(out.ETag),
	}
	if total, ok := totalFromContentRange(aws.ToString(out.ContentRange)); ok {
		info.Size = total
	}
	return buf[:m], info, nil
}

// totalFromContentRange parses the complete length of "bytes 0-99/1234".
func totalFromContentRange(v string) (int64, bool) {
	_, total, ok := strings.Cut(v, "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(total), 10, 64)
	return n, err == nil && n >= 0
}

func (s *S3) stat(ctx context.Context, key string) (Info, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return Info{}, s.wrap("stat", key, err)
	}
	return Info{
		Size:        aws.ToInt64(out.ContentLength),
		ContentType: aws.ToString(out.ContentType),
		ModTime:     aws.ToTime(out.LastModified),
		ETag:        aws.ToString(out.ETag),
	}, nil
}

// Delete removes the object; a missing object is not an error.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}); err != nil && !isNotFound(err) {
		return fmt.Errorf("media: delete %s: %w", key, err)
	}
	return nil
}

// URL returns the public URL of key.
func (s *S3) URL(key string) string {
	return s.base.url(key)
}

// KeyFromURL returns the key of one of this store's own public URLs.
func (s *S3) KeyFromURL(rawURL string) (string, bool) {
	return s.base.keyFromURL(rawURL)
}

// PresignPut returns a PUT URL valid for ttl and the headers to send with it; the signature covers
// Content-Type and Content-Length, so a PUT with any other type or length is refused.
func (s *S3) PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (string, map[string]string, error) {
	if err := CheckKey(key); err != nil {
		return "", nil, err
	}
	if size <= 0 || contentType == "" || ttl <= 0 {
		return "", nil, fmt.Errorf("media: presign %s: need a positive size and ttl and a content type", key)
	}
	req, err := s.presign.PresignPutObject(ctx, &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &key,
		ContentType:   &contentType,
		ContentLength: aws.Int64(size),
	}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", nil, fmt.Errorf("media: presign %s: %w", key, err)
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return "", nil, fmt.Errorf("media: presign %s: %w", key, err)
	}
	signed := ";" + u.Query().Get("X-Amz-SignedHeaders") + ";"
	if !strings.Contains(signed, ";content-type;") || !strings.Contains(signed, ";content-length;") {
		return "", nil, fmt.Errorf("media: presign %s: signature does not cover content-type and content-length (%s)", key, strings.Trim(signed, ";"))
	}
	headers := map[string]string{
		"Content-Type":   contentType,
		"Content-Length": strconv.FormatInt(size, 10),
	}
	for k, v := range req.SignedHeader {
		k = http.CanonicalHeaderKey(k)
		if k == "Host" || len(v) == 0 {
			continue
		}
		if _, ok := headers[k]; !ok {
			headers[k] = strings.Join(v, ",")
		}
	}
	return req.URL, headers, nil
}

func (s *S3) wrap(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return fmt.Errorf("media: %s %s: %w", op, key, err)
}

func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func isNotFound(err error) bool {
	var noKey *types.NoSuchKey
	var notFound *types.NotFound
	var noBucket *types.NoSuchBucket
	return errors.As(err, &noKey) || errors.As(err, &notFound) || errors.As(err, &noBucket) ||
		statusOf(err) == http.StatusNotFound
}
