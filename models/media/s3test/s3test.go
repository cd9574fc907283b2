// Package s3test starts a real S3-compatible server (Versity S3 Gateway, versitygw) for tests.
//
// Install it once with:
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//
// Tests that call Start are skipped when versitygw is not installed, except under CI=true, where they fail.
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"studio/models/media"
)

// Credentials and bucket of every server started by Start.
const (
	AccessKey = "studiotestaccess"
	SecretKey = "studiotestsecret0123456789"
	Bucket    = "studio-media"
)

// Binary returns the path of the versitygw binary from PATH or $(go env GOPATH)/bin.
func Binary() (string, bool) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, true
	}
	for _, dir := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(dir, "bin", "versitygw")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, true
		}
	}
	return "", false
}

// Start runs versitygw on a free loopback port over a temporary directory, creates the bucket,
// and returns a config for media.NewS3; the server stops when the test ends.
func Start(tb testing.TB) media.S3Config {
	tb.Helper()
	bin, ok := Binary()
	if !ok {
		if os.Getenv("CI") == "true" {
			tb.Fatal("s3test: versitygw not found; install it with go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")
		}
		tb.Skip("s3test: versitygw not installed (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
	}
	var lastErr error
	for range 3 {
		cfg, err := start(tb, bin)
		if err == nil {
			return cfg
		}
		lastErr = err
	}
	tb.Fatalf("s3test: %v", lastErr)
	return media.S3Config{}
}

func start(tb testing.TB, bin string) (media.S3Config, error) {
	addr, err := freeAddr()
	if err != nil {
		return media.S3Config{}, err
	}
	dir := tb.TempDir()
	out := &syncBuffer{}
	cmd := exec.Command(bin,
		"--access", AccessKey, "--secret", SecretKey,
		"--port", addr, "--quiet",
		"posix", dir)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return media.S3Config{}, fmt.Errorf("start versitygw: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	if err := waitListening(addr, exited); err != nil {
		stop()
		return media.S3Config{}, fmt.Errorf("versitygw on %s: %w; output:\n%s", addr, err, out.String())
	}
	tb.Cleanup(stop)

	cfg := media.S3Config{
		Endpoint:  "http://" + addr,
		Bucket:    Bucket,
		Region:    "us-east-1",
		AccessKey: AccessKey,
		SecretKey: SecretKey,
		PublicURL: "http://" + addr + "/" + Bucket,
		TempDir:   tb.TempDir(),
	}
	store, err := media.NewS3(cfg)
	if err != nil {
		return media.S3Config{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := store.EnsureBucket(ctx); err != nil {
		return media.S3Config{}, fmt.Errorf("create bucket: %w; output:\n%s", err, out.String())
	}
	return cfg, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitListening(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("exited early")
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not listening after 20s")
}

// syncBuffer collects the server's output for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
