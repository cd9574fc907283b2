package media

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestIngestStoresByDetectedType(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		data []byte
		ext  string
		mime string
	}{
		{"jpeg sent as png", SampleJPEG(), ".jpg", "image/jpeg"},
		{"png", SamplePNG(), ".png", "image/png"},
		{"wav", SampleWAV(), ".wav", "audio/wav"},
		{"mov", SampleMOV(), ".mov", "video/quicktime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLocal(t)
			obj, err := Ingest(ctx, s, "uploads/u1/w1", bytes.NewReader(tt.data), IngestOptions{})
			if err != nil {
				t.Fatalf("Ingest: %v", err)
			}
			if !strings.HasPrefix(obj.Key, "uploads/u1/w1/") || !strings.HasSuffix(obj.Key, tt.ext) {
				t.Errorf("key = %q, want uploads/u1/w1/<uuid>%s", obj.Key, tt.ext)
			}
			if obj.Kind.MIME != tt.mime || obj.Size != int64(len(tt.data)) || obj.URL != s.URL(obj.Key) {
				t.Errorf("object = %+v, want mime %s size %d", obj, tt.mime, len(tt.data))
			}
			head, info, err := s.ReadHead(ctx, obj.Key, len(tt.data)+1)
			if err != nil || !bytes.Equal(head, tt.data) || info.ContentType != tt.mime {
				t.Errorf("stored %d bytes, type %q, %v; want the %d bytes, %s", len(head), info.ContentType, err, len(tt.data), tt.mime)
			}
			kind, info, err := Inspect(ctx, s, obj.Key, nil)
			if err != nil || kind != obj.Kind || info.Size != obj.Size {
				t.Errorf("Inspect = %+v, %+v, %v; want %+v size %d", kind, info, err, obj.Kind, obj.Size)
			}
		})
	}
}

func TestIngestNamed(t *testing.T) {
	s := newLocal(t)
	obj, err := Ingest(context.Background(), s, "jobs", bytes.NewReader(SamplePNG()), IngestOptions{Name: "5b3c2f9e-job"})
	if err != nil || obj.Key != "jobs/5b3c2f9e-job.png" {
		t.Errorf("Ingest = %+v, %v; want key jobs/5b3c2f9e-job.png", obj, err)
	}
	_, err = Ingest(context.Background(), s, "uploads/../x", bytes.NewReader(SamplePNG()), IngestOptions{})
	if !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Ingest(bad prefix) = %v, want ErrInvalidKey", err)
	}
}

func TestIngestRejectsUnknownBytes(t *testing.T) {
	s := newLocal(t)
	for _, data := range [][]byte{nil, []byte("just text"), bytes.Repeat([]byte{0x5a}, 10000)} {
		if _, err := Ingest(context.Background(), s, "u", bytes.NewReader(data), IngestOptions{}); !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("Ingest(%d bytes) = %v, want ErrUnsupportedType", len(data), err)
		}
	}
	if files := storedFiles(t, s); len(files) != 0 {
		t.Errorf("files = %v, want none", files)
	}
}

// countingReader counts what is read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestIngestLimit(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		sample  []byte
		size    int64
		maxSize int64
		ok      bool
	}{
		{"png at override limit", SamplePNG(), 10000, 10000, true},
		{"png one byte over override", SamplePNG(), 10001, 10000, false},
		{"mp4 at override limit", SampleMP4(), 65536, 65536, true},
		{"mp4 one byte over override", SampleMP4(), 65537, 65536, false},
		{"head alone over limit", SampleMP4(), 5000, 4000, false},
		{"png at 8 MB", SamplePNG(), 8 << 20, 0, true},
		{"png at 8 MB plus one", SamplePNG(), 8<<20 + 1, 0, false},
		{"wav at 8 MB plus one is audio", SampleWAV(), 8<<20 + 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLocal(t)
			src := &countingReader{r: newStream(tt.sample, tt.size)}
			obj, err := Ingest(ctx, s, "uploads/u/w", src, IngestOptions{MaxSize: tt.maxSize})
			if tt.ok {
				if err != nil || obj.Size != tt.size {
					t.Fatalf("Ingest = %+v, %v; want %d bytes stored", obj, err, tt.size)
				}
				if files := storedFiles(t, s); len(files) != 1 {
					t.Errorf("files = %v, want one", files)
				}
				return
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Ingest = %+v, %v; want ErrTooLarge", obj, err)
			}
			if files := storedFiles(t, s); len(files) != 0 {
				t.Errorf("files after ErrTooLarge = %v, want none", files)
			}
		})
	}
}

func TestIngestStopsReadingPastLimit(t *testing.T) {
	s := newLocal(t)
	const limit = 100000
	src := &countingReader{r: newStream(SampleMP4(), 1<<40)} // "endless"
	_, err := Ingest(context.Background(), s, "u", src, IngestOptions{MaxSize: limit})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Ingest = %v, want ErrTooLarge", err)
	}
	if src.n > limit+1 {
		t.Errorf("read %d bytes from the source, want at most limit+1 = %d", src.n, limit+1)
	}
}

func TestIngestDeclaredSize(t *testing.T) {
	ctx := context.Background()
	s := newLocal(t)
	data := SamplePNG()
	if _, err := Ingest(ctx, s, "u", bytes.NewReader(data), IngestOptions{Size: int64(len(data))}); err != nil {
		t.Errorf("Ingest(right size) = %v", err)
	}
	if _, err := Ingest(ctx, s, "u", bytes.NewReader(data), IngestOptions{Size: int64(len(data)) + 1}); !errors.Is(err, ErrSizeMismatch) {
		t.Errorf("Ingest(wrong size) = %v, want ErrSizeMismatch", err)
	}
	src := &countingReader{r: newStream(SamplePNG(), 1<<30)}
	if _, err := Ingest(ctx, s, "u", src, IngestOptions{Size: 9 << 20}); !errors.Is(err, ErrTooLarge) || src.n > HeadSize {
		t.Errorf("Ingest(declared 9 MB png) = %v after reading %d bytes; want ErrTooLarge before the body", err, src.n)
	}
}

func TestInspectTooLarge(t *testing.T) {
	ctx := context.Background()
	s := newLocal(t)
	key := "uploads/u/big.png"
	if err := s.Put(ctx, key, newStream(SamplePNG(), 8<<20+1), -1, ""); err != nil {
		t.Fatal(err)
	}
	if _, info, err := Inspect(ctx, s, key, nil); !errors.Is(err, ErrTooLarge) || info.Size != 8<<20+1 {
		t.Errorf("Inspect = %+v, %v; want ErrTooLarge with the true size", info, err)
	}
	if _, _, err := Inspect(ctx, s, "uploads/u/missing.png", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Inspect(missing) = %v, want ErrNotFound", err)
	}
}

func TestReadAll(t *testing.T) {
	data, kind, err := ReadAll(bytes.NewReader(SampleJPEG()), DetectImageForReading)
	if err != nil || kind.Ext != ".jpg" || !bytes.Equal(data, SampleJPEG()) {
		t.Errorf("ReadAll(jpeg) = %d bytes, %+v, %v", len(data), kind, err)
	}
	if _, _, err := ReadAll(newStream(SamplePNG(), 6<<20), DetectImageForReading); err != nil {
		t.Errorf("ReadAll(6 MB png) = %v, want nil", err)
	}
	if _, _, err := ReadAll(newStream(SamplePNG(), 6<<20+1), DetectImageForReading); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadAll(6 MB + 1 png) = %v, want ErrTooLarge", err)
	}
	if _, _, err := ReadAll(bytes.NewReader(SampleGIF()), DetectImageForReading); !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("ReadAll(gif) = %v, want ErrUnsupportedType", err)
	}
}

// heapPeak samples the live heap while fn runs and returns its growth over the starting level, and the bytes allocated.
func heapPeak(fn func()) (peakGrowth, allocated uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var before runtime.MemStats
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
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return peak.Load() - base, after.TotalAlloc - before.TotalAlloc
}

func TestIngest50MBMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 50 MB")
	}
	s := newLocal(t)
	var obj Object
	var err error
	peak, allocated := heapPeak(func() {
		obj, err = Ingest(context.Background(), s, "uploads/u/w", newStream(SampleMP4(), MaxVideoSize), IngestOptions{})
	})
	if err != nil || obj.Size != MaxVideoSize || obj.Kind.Ext != ".mp4" {
		t.Fatalf("Ingest = %+v, %v; want a 50 MB mp4", obj, err)
	}
	t.Logf("50 MB ingest: peak heap growth %d KiB, %d KiB allocated in all", peak>>10, allocated>>10)
	if allocated > 16<<20 {
		t.Errorf("allocated %d bytes during a 50 MB ingest, want under 16 MB", allocated)
	}
}

func BenchmarkIngest50MB(b *testing.B) {
	s := newLocal(b)
	ctx := context.Background()
	head := SampleMP4()
	b.SetBytes(MaxVideoSize)
	b.ReportAllocs()
	var maxPeak, totalAlloc uint64
	for b.Loop() {
		peak, allocated := heapPeak(func() {
			obj, err := Ingest(ctx, s, "bench", newStream(head, MaxVideoSize), IngestOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Delete(ctx, obj.Key); err != nil {
				b.Fatal(err)
			}
		})
		maxPeak = max(maxPeak, peak)
		totalAlloc += allocated
	}
	b.ReportMetric(float64(maxPeak)/(1<<20), "peak-heap-growth-MB")
	b.ReportMetric(float64(totalAlloc)/float64(b.N)/(1<<20), "allocated-MB/op")
}
