package media

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestDetectAccepted(t *testing.T) {
	tests := []struct {
		name   string
		data   []byte
		typ    MediaType
		mime   string
		ext    string
		maxLen int64
	}{
		{"png", SamplePNG(), Image, "image/png", ".png", 8 << 20},
		{"jpeg", SampleJPEG(), Image, "image/jpeg", ".jpg", 8 << 20},
		{"webp", SampleWebP(), Image, "image/webp", ".webp", 8 << 20},
		{"gif", SampleGIF(), Image, "image/gif", ".gif", 8 << 20},
		{"mp3 frames", SampleMP3(), Audio, "audio/mpeg", ".mp3", 20 << 20},
		{"mp3 id3", SampleMP3ID3(), Audio, "audio/mpeg", ".mp3", 20 << 20},
		{"wav", SampleWAV(), Audio, "audio/wav", ".wav", 20 << 20},
		{"m4a", SampleM4A(), Audio, "audio/mp4", ".m4a", 20 << 20},
		{"m4a by compatible brand", cat(ftyp("XXXX", "M4A ", "isom"), box("mdat")), Audio, "audio/mp4", ".m4a", 20 << 20},
		{"flac", SampleFLAC(), Audio, "audio/flac", ".flac", 20 << 20},
		{"flac streaminfo only", cat([]byte("fLaC"), []byte{0x80, 0, 0, 34}, make([]byte, 34)), Audio, "audio/flac", ".flac", 20 << 20},
		{"ogg opus", SampleOgg(), Audio, "audio/ogg", ".ogg", 20 << 20},
		{"mp4", SampleMP4(), Video, "video/mp4", ".mp4", 50 << 20},
		{"mp4 mp42", cat(ftyp("mp42", "mp42", "isom"), box("mdat")), Video, "video/mp4", ".mp4", 50 << 20},
		{"mov", SampleMOV(), Video, "video/quicktime", ".mov", 50 << 20},
		{"mov without ftyp", cat(box("moov", make([]byte, 32)), box("mdat")), Video, "video/quicktime", ".mov", 50 << 20},
		{"webm", SampleWebM(), Video, "video/webm", ".webm", 50 << 20},
		{"webm without tracks in head", SampleWebM()[:60], Video, "video/webm", ".webm", 50 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.data)
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			want := Kind{tt.typ, tt.mime, tt.ext, tt.maxLen}
			if got != want {
				t.Errorf("Detect = %+v, want %+v", got, want)
			}
			// Only the leading bytes matter: trailing data changes nothing.
			long := append(bytes.Clone(tt.data), make([]byte, 3*HeadSize)...)
			if got, err := Detect(long); err != nil || got != want {
				t.Errorf("Detect(with trailing bytes) = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}

func TestDetectRejected(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"text", []byte("hello, this is not an image\n")},
		{"html", []byte("<!doctype html><html><body>x</body></html>")},
		{"pdf", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")},
		{"zip", cat([]byte("PK\x03\x04"), make([]byte, 40))},
		{"bmp", cat([]byte("BM"), le32(70), make([]byte, 64))},
		{"heic", cat(ftyp("heic", "mif1", "heic"), box("meta"))},
		{"avif", cat(ftyp("avif", "avif", "mif1", "miaf"), box("meta"))},
		{"3gp", cat(ftyp("3gp4", "3gp4"), box("mdat"))},
		{"ftyp too small", cat(be32(8), []byte("ftyp"), make([]byte, 16))},
		{"webm audio only", SampleWebMAudioOnly()},
		{"aac adts", cat([]byte{0xff, 0xf1, 0x50, 0x80, 0x02, 0x1f, 0xfc}, make([]byte, 100))},
		{"mp3 sync without frames", cat([]byte{0xff, 0xfb}, []byte("not really an mp3 file at all, just text after the sync"))},
		{"id3 only bad version", cat([]byte("ID3"), []byte{9, 0, 0, 0, 0, 0, 10}, make([]byte, 20))},
		{"ogg theora", cat([]byte("OggS\x00\x02"), make([]byte, 22), []byte{1, 42}, []byte("\x80theora"), make([]byte, 35))},
		{"riff avi", cat([]byte("RIFF"), le32(100), []byte("AVI LIST"), make([]byte, 40))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(tt.data)
			if !errors.Is(err, ErrUnsupportedType) {
				t.Errorf("Detect = %+v, %v; want ErrUnsupportedType", got, err)
			}
		})
	}
}

func TestDetectRandomBytes(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		data := make([]byte, HeadSize)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		if got, err := Detect(data); !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("seed %d: Detect(random) = %+v, %v; want ErrUnsupportedType", seed, got, err)
		}
	}
}

func TestDetectImageForReading(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		ext  string // empty: rejected
	}{
		{"png", SamplePNG(), ".png"},
		{"jpeg", SampleJPEG(), ".jpg"},
		{"webp", SampleWebP(), ".webp"},
		{"gif", SampleGIF(), ""},
		{"mp4", SampleMP4(), ""},
		{"text", []byte("nope"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DetectImageForReading(tt.data)
			if tt.ext == "" {
				if !errors.Is(err, ErrUnsupportedType) {
					t.Errorf("got %+v, %v; want ErrUnsupportedType", got, err)
				}
				return
			}
			if err != nil || got.Ext != tt.ext || got.MaxSize != 6<<20 || got.Type != Image {
				t.Errorf("got %+v, %v; want ext %s, 6 MB image", got, err, tt.ext)
			}
		})
	}
}

func TestKindByExt(t *testing.T) {
	tests := []struct {
		ext, want string
	}{
		{"png", "image/png"}, {".PNG", "image/png"}, {"jpeg", "image/jpeg"}, {"jpg", "image/jpeg"},
		{".m4a", "audio/mp4"}, {"mov", "video/quicktime"}, {"webm", "video/webm"}, {"ogg", "audio/ogg"},
		{"exe", ""}, {"", ""}, {"../png", ""},
	}
	for _, tt := range tests {
		k, ok := KindByExt(tt.ext)
		if ok != (tt.want != "") || k.MIME != tt.want {
			t.Errorf("KindByExt(%q) = %+v, %v; want %q", tt.ext, k, ok, tt.want)
		}
	}
	if n := len(Kinds()); n != 12 {
		t.Errorf("len(Kinds()) = %d, want 12", n)
	}
}

func TestContentTypeByExt(t *testing.T) {
	tests := map[string]string{
		".png": "image/png", ".jpg": "image/jpeg", ".mp4": "video/mp4", ".m4a": "audio/mp4",
		".json": "application/json", "": "application/octet-stream", ".nothing": "application/octet-stream",
	}
	for ext, want := range tests {
		if got := ContentTypeByExt(ext); got != want {
			t.Errorf("ContentTypeByExt(%q) = %q, want %q", ext, got, want)
		}
	}
}

func FuzzDetect(f *testing.F) {
	for _, s := range [][]byte{
		SamplePNG(), SampleJPEG(), SampleGIF(), SampleWebP(), SampleWAV(), SampleMP3(), SampleMP3ID3(),
		SampleMP4(), SampleMOV(), SampleM4A(), SampleWebM(), SampleWebMAudioOnly(), SampleFLAC(), SampleOgg(),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := Detect(data)
		if err == nil {
			if _, ok := KindByExt(k.Ext); !ok {
				t.Errorf("Detect returned a kind outside the accepted set: %+v", k)
			}
		} else if !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("Detect error %v is not ErrUnsupportedType", err)
		}
	})
}
