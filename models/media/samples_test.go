package media

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math"
)

// Sample files of every accepted format, built in the tests; exported for the external test package.

func testImage() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 16, 12))
	for y := range 12 {
		for x := range 16 {
			img.Set(x, y, color.RGBA{uint8(x * 16), uint8(y * 20), 128, 255})
		}
	}
	return img
}

// SamplePNG returns a real PNG image.
func SamplePNG() []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, testImage()); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// SampleJPEG returns a real JPEG image.
func SampleJPEG() []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, testImage(), &jpeg.Options{Quality: 80}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// SampleGIF returns a real GIF image.
func SampleGIF() []byte {
	var b bytes.Buffer
	if err := gif.Encode(&b, testImage(), nil); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// SampleWebP returns a 1x1 lossless WebP image.
func SampleWebP() []byte {
	return []byte{
		'R', 'I', 'F', 'F', 0x1a, 0, 0, 0, 'W', 'E', 'B', 'P',
		'V', 'P', '8', 'L', 0x0d, 0, 0, 0, 0x2f, 0, 0, 0,
		0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0x00,
	}
}

func le16(v int) []byte { return binary.LittleEndian.AppendUint16(nil, uint16(v)) }
func le32(v int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func be32(v int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// SampleWAV returns a 16-bit mono PCM WAV of a 440 Hz tone.
func SampleWAV() []byte {
	var samples []byte
	for i := range 2000 {
		v := int16(8000 * math.Sin(2*math.Pi*440*float64(i)/8000))
		samples = append(samples, le16(int(v))...)
	}
	return cat(
		[]byte("RIFF"), le32(36+len(samples)), []byte("WAVE"),
		[]byte("fmt "), le32(16), le16(1), le16(1), le32(8000), le32(16000), le16(2), le16(16),
		[]byte("data"), le32(len(samples)), samples,
	)
}

func mp3Frames(n int) []byte {
	// MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, no padding: 417-byte frames.
	frame := make([]byte, 417)
	copy(frame, []byte{0xff, 0xfb, 0x90, 0x64})
	return bytes.Repeat(frame, n)
}

// SampleMP3 returns MPEG audio frames with no tag.
func SampleMP3() []byte { return mp3Frames(8) }

// SampleMP3ID3 returns MPEG audio frames behind an ID3v2.3 tag.
func SampleMP3ID3() []byte {
	title := cat([]byte("TIT2"), be32(6), []byte{0, 0}, []byte{0}, []byte("tone\x00"))
	return cat([]byte("ID3"), []byte{3, 0, 0}, []byte{0, 0, 0, byte(len(title))}, title, mp3Frames(4))
}

func box(typ string, payload ...[]byte) []byte {
	body := cat(payload...)
	return cat(be32(8+len(body)), []byte(typ), body)
}

func ftyp(major string, compatible ...string) []byte {
	parts := [][]byte{[]byte(major), be32(0x200)}
	for _, c := range compatible {
		parts = append(parts, []byte(c))
	}
	return box("ftyp", parts...)
}

// SampleMP4 returns the leading boxes of an MP4 video.
func SampleMP4() []byte {
	return cat(ftyp("isom", "isom", "iso2", "avc1", "mp41"), box("free"), box("mdat", make([]byte, 64)))
}

// SampleMOV returns the leading atoms of a QuickTime movie.
func SampleMOV() []byte {
	return cat(ftyp("qt  ", "qt  "), box("wide"), box("mdat", make([]byte, 64)))
}

// SampleM4A returns the leading boxes of an M4A audio file.
func SampleM4A() []byte {
	return cat(ftyp("M4A ", "M4A ", "mp42", "isom"), box("mdat", make([]byte, 64)))
}

func ebmlSize(n int) []byte {
	switch {
	case n < 0x7f:
		return []byte{0x80 | byte(n)}
	case n < 0x3fff:
		return []byte{0x40 | byte(n>>8), byte(n)}
	default:
		return []byte{0x10 | byte(n>>24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
}

func ebml(id []byte, payload ...[]byte) []byte {
	body := cat(payload...)
	return cat(id, ebmlSize(len(body)), body)
}

func ebmlUint(id []byte, v int) []byte { return ebml(id, []byte{byte(v)}) }

func webm(trackType int, codec string) []byte {
	header := ebml([]byte{0x1a, 0x45, 0xdf, 0xa3},
		ebmlUint([]byte{0x42, 0x86}, 1), ebmlUint([]byte{0x42, 0xf7}, 1),
		ebmlUint([]byte{0x42, 0xf2}, 4), ebmlUint([]byte{0x42, 0xf3}, 8),
		ebml([]byte{0x42, 0x82}, []byte("webm")),
		ebmlUint([]byte{0x42, 0x87}, 4), ebmlUint([]byte{0x42, 0x85}, 2))
	info := ebml([]byte{0x15, 0x49, 0xa9, 0x66},
		ebml([]byte{0x2a, 0xd7, 0xb1}, []byte{0x0f, 0x42, 0x40}),
		ebml([]byte{0x4d, 0x80}, []byte("studio")), ebml([]byte{0x57, 0x41}, []byte("studio")))
	entry := [][]byte{
		ebmlUint([]byte{0xd7}, 1), ebmlUint([]byte{0x73, 0xc5}, 1),
		ebmlUint([]byte{0x83}, trackType), ebml([]byte{0x86}, []byte(codec)),
	}
	if trackType == 1 {
		entry = append(entry, ebml([]byte{0xe0}, ebmlUint([]byte{0xb0}, 16), ebmlUint([]byte{0xba}, 16)))
	}
	tracks := ebml([]byte{0x16, 0x54, 0xae, 0x6b}, ebml([]byte{0xae}, entry...))
	cluster := cat([]byte{0x1f, 0x43, 0xb6, 0x75, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ebmlUint([]byte{0xe7}, 0))
	segment := cat([]byte{0x18, 0x53, 0x80, 0x67, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, info, tracks, cluster)
	return cat(header, segment, make([]byte, 64))
}

// SampleWebM returns the leading elements of a WebM video with one VP8 track.
func SampleWebM() []byte { return webm(1, "V_VP8") }

// SampleWebMAudioOnly returns the leading elements of a WebM file with only an Opus track.
func SampleWebMAudioOnly() []byte { return webm(2, "A_OPUS") }

// SampleFLAC returns a FLAC stream header with its STREAMINFO and a padding block.
func SampleFLAC() []byte {
	streamInfo := cat(
		[]byte{0x10, 0x00, 0x10, 0x00}, // min and max block size 4096
		[]byte{0, 0, 0x10, 0, 0x20, 0}, // min and max frame size
		[]byte{0x0a, 0xc4, 0x42, 0xf0}, // 44100 Hz, 2 channels, 16 bits
		[]byte{0, 0, 0x10, 0},          // total samples
		make([]byte, 16),               // MD5
	)
	return cat([]byte("fLaC"), []byte{0x00, 0, 0, 34}, streamInfo, []byte{0x81, 0, 0, 8}, make([]byte, 8))
}

// SampleOgg returns the first page of an Ogg Opus stream, with a correct page checksum.
func SampleOgg() []byte {
	head := cat([]byte("OpusHead"), []byte{1, 2}, le16(312), le32(48000), le16(0), []byte{0})
	page := cat([]byte("OggS"), []byte{0, 0x02}, make([]byte, 8), le32(0x5354), le32(0), le32(0),
		[]byte{1, byte(len(head))}, head)
	binary.LittleEndian.PutUint32(page[22:26], oggCRC(page))
	return page
}

func oggCRC(b []byte) uint32 {
	var crc uint32
	for _, c := range b {
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04c11db7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// streamOf serves head then zero bytes, size bytes in all, without holding them in memory.
type streamOf struct {
	head []byte
	size int64
	off  int64
}

func newStream(head []byte, size int64) *streamOf { return &streamOf{head: head, size: size} }

func (s *streamOf) Read(p []byte) (int, error) {
	if s.off >= s.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.size-s.off)]
	n := 0
	if s.off < int64(len(s.head)) {
		n = copy(p, s.head[s.off:])
	}
	clear(p[n:])
	s.off += int64(len(p))
	return len(p), nil
}

// NewStream serves head then zero bytes, size bytes in all, without holding them in memory.
func NewStream(head []byte, size int64) io.Reader { return newStream(head, size) }

// HeapPeak runs fn and returns the peak live-heap growth seen meanwhile and the bytes allocated in all.
var HeapPeak = heapPeak
