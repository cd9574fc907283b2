package media

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"mime"
	"slices"
	"strings"

	"github.com/gabriel-vasile/mimetype"
)

// MediaType is the broad kind of a media file: image, audio or video.
type MediaType string

// The media types of spec 4.11.
const (
	Image MediaType = "image"
	Audio MediaType = "audio"
	Video MediaType = "video"
)

// Size limits of spec 4.11 and section 8, in bytes (1 MB = 1 MiB).
const (
	MaxImageSize        int64 = 8 << 20
	MaxAudioSize        int64 = 20 << 20
	MaxVideoSize        int64 = 50 << 20
	MaxReadingImageSize int64 = 6 << 20
)

// HeadSize is how many leading bytes type detection looks at.
const HeadSize = 4096

// Kind is an accepted media format: its media type, canonical MIME type and extension, and size limit.
type Kind struct {
	Type    MediaType
	MIME    string
	Ext     string // canonical extension with its dot, such as ".jpg"
	MaxSize int64
}

var (
	kindPNG  = Kind{Image, "image/png", ".png", MaxImageSize}
	kindJPG  = Kind{Image, "image/jpeg", ".jpg", MaxImageSize}
	kindWebP = Kind{Image, "image/webp", ".webp", MaxImageSize}
	kindGIF  = Kind{Image, "image/gif", ".gif", MaxImageSize}
	kindMP3  = Kind{Audio, "audio/mpeg", ".mp3", MaxAudioSize}
	kindWAV  = Kind{Audio, "audio/wav", ".wav", MaxAudioSize}
	kindM4A  = Kind{Audio, "audio/mp4", ".m4a", MaxAudioSize}
	kindFLAC = Kind{Audio, "audio/flac", ".flac", MaxAudioSize}
	kindOGG  = Kind{Audio, "audio/ogg", ".ogg", MaxAudioSize}
	kindMP4  = Kind{Video, "video/mp4", ".mp4", MaxVideoSize}
	kindMOV  = Kind{Video, "video/quicktime", ".mov", MaxVideoSize}
	kindWebM = Kind{Video, "video/webm", ".webm", MaxVideoSize}

	acceptedKinds = []Kind{
		kindPNG, kindJPG, kindWebP, kindGIF,
		kindMP3, kindWAV, kindM4A, kindFLAC, kindOGG,
		kindMP4, kindMOV, kindWebM,
	}
)

// Kinds returns every accepted format of spec 4.11, images first, then audio, then video.
func Kinds() []Kind {
	return slices.Clone(acceptedKinds)
}

// KindByExt returns the accepted format for an extension such as "png", ".JPG" or "jpeg".
func KindByExt(ext string) (Kind, bool) {
	ext = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(ext), "."))
	if ext == "jpeg" {
		ext = "jpg"
	}
	for _, k := range acceptedKinds {
		if k.Ext == "."+ext {
			return k, true
		}
	}
	return Kind{}, false
}

// ContentTypeByExt returns the Content-Type to serve a stored file with, from its extension.
func ContentTypeByExt(ext string) string {
	if k, ok := KindByExt(ext); ok {
		return k.MIME
	}
	if t := mime.TypeByExtension(strings.ToLower(ext)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Detect decides the format of a file from its leading bytes (at most HeadSize are used).
func Detect(head []byte) (Kind, error) {
	if len(head) == 0 {
		return Kind{}, fmt.Errorf("%w: empty file", ErrUnsupportedType)
	}
	if len(head) > HeadSize {
		head = head[:HeadSize]
	}
	if k, ok, err := detectISOBMFF(head); ok {
		return k, err
	}
	if isFLAC(head) {
		return kindFLAC, nil
	}
	m := mimetype.Detect(head)
	switch {
	case m.Is("image/png"), m.Is("image/apng"):
		return kindPNG, nil
	case m.Is("image/jpeg"):
		return kindJPG, nil
	case m.Is("image/webp"):
		return kindWebP, nil
	case m.Is("image/gif"):
		return kindGIF, nil
	case m.Is("audio/mpeg"):
		if hasID3v2(head) || hasMP3Frames(head) {
			return kindMP3, nil
		}
		return Kind{}, fmt.Errorf("%w: no valid MPEG audio Layer III frames", ErrUnsupportedType)
	case m.Is("audio/wav"):
		return kindWAV, nil
	case m.Is("audio/flac"):
		return kindFLAC, nil
	case m.Is("audio/ogg"):
		return kindOGG, nil
	case m.Is("video/webm"):
		if hasVideo, known := webmHasVideo(head); known && !hasVideo {
			return Kind{}, fmt.Errorf("%w: WebM without a video track", ErrUnsupportedType)
		}
		return kindWebM, nil
	case m.Is("video/quicktime"):
		return kindMOV, nil
	}
	return Kind{}, fmt.Errorf("%w: detected %s", ErrUnsupportedType, baseMIME(m.String()))
}

// DetectImageForReading decides the format of an image-reading input (png, jpg or webp, at most 6 MB).
func DetectImageForReading(head []byte) (Kind, error) {
	k, err := Detect(head)
	if err != nil {
		return Kind{}, err
	}
	switch k {
	case kindPNG, kindJPG, kindWebP:
		k.MaxSize = MaxReadingImageSize
		return k, nil
	}
	return Kind{}, fmt.Errorf("%w: %s is not accepted for image reading", ErrUnsupportedType, k.MIME)
}

// sniffMIME names the type of any bytes: the accepted format when there is one, else mimetype's guess.
func sniffMIME(data []byte) string {
	if k, err := Detect(data); err == nil {
		return k.MIME
	}
	if len(data) > HeadSize {
		data = data[:HeadSize]
	}
	return baseMIME(mimetype.Detect(data).String())
}

func baseMIME(s string) string {
	s, _, _ = strings.Cut(s, ";")
	return strings.TrimSpace(s)
}

// ISO base media file format (mp4, mov, m4a): decided from the ftyp box brands.
var (
	movBrands = []string{"qt  "}
	m4aBrands = []string{"M4A ", "M4B "}
	mp4Brands = []string{
		"isom", "iso2", "iso3", "iso4", "iso5", "iso6", "iso7", "iso8", "iso9",
		"mp41", "mp42", "mp71", "avc1", "av01", "dash", "cmfc", "mmp4", "MSNV",
		"M4V ", "M4VH", "M4VP", "XAVC", "f4v ",
	}
	// stillBrands are image formats (HEIF, AVIF, JPEG 2000, CR3) that share the container.
	stillBrands = []string{
		"avif", "avis", "heic", "heix", "hevc", "hevx", "heim", "heis", "hevm", "hevs",
		"mif1", "msf1", "miaf", "avic", "avcs", "jp2 ", "jpx ", "jpm ", "mjp2", "crx ",
	}
)

// detectISOBMFF reports ok when head starts with an ftyp box, with the format or the reason it is refused.
func detectISOBMFF(head []byte) (Kind, bool, error) {
	if len(head) < 8 || string(head[4:8]) != "ftyp" {
		return Kind{}, false, nil
	}
	size := binary.BigEndian.Uint32(head[:4])
	if size < 16 || size%4 != 0 || size > HeadSize || len(head) < 16 {
		return Kind{}, true, fmt.Errorf("%w: malformed ftyp box", ErrUnsupportedType)
	}
	major := string(head[8:12])
	var compatible []string
	for i := 16; i+4 <= int(size) && i+4 <= len(head); i += 4 {
		compatible = append(compatible, string(head[i:i+4]))
	}
	switch {
	case slices.Contains(movBrands, major):
		return kindMOV, true, nil
	case slices.Contains(m4aBrands, major):
		return kindM4A, true, nil
	case slices.Contains(mp4Brands, major):
		return kindMP4, true, nil
	case slices.Contains(stillBrands, major):
		return Kind{}, true, fmt.Errorf("%w: image container brand %q", ErrUnsupportedType, major)
	}
	has := func(brands []string) bool {
		return slices.ContainsFunc(compatible, func(b string) bool { return slices.Contains(brands, b) })
	}
	switch {
	case has(movBrands):
		return kindMOV, true, nil
	case has(stillBrands):
		return Kind{}, true, fmt.Errorf("%w: image container brand %q", ErrUnsupportedType, major)
	case has(m4aBrands):
		return kindM4A, true, nil
	case has(mp4Brands):
		return kindMP4, true, nil
	}
	return Kind{}, true, fmt.Errorf("%w: unknown container brand %q", ErrUnsupportedType, major)
}

// isFLAC reports whether head starts with "fLaC" and a STREAMINFO block header (last-block flag either way).
func isFLAC(head []byte) bool {
	return len(head) >= 8 && string(head[:4]) == "fLaC" && head[4]&0x7f == 0 &&
		head[5] == 0 && head[6] == 0 && head[7] == 0x22
}

// hasID3v2 reports whether head starts with a well-formed ID3v2 tag header.
func hasID3v2(head []byte) bool {
	if len(head) < 10 || !bytes.HasPrefix(head, []byte("ID3")) {
		return false
	}
	if head[3] < 2 || head[3] > 4 || head[4] != 0 || head[5]&0x0f != 0 {
		return false
	}
	for _, b := range head[6:10] {
		if b&0x80 != 0 {
			return false
		}
	}
	return true
}

// mp3Header is a decoded MPEG audio Layer III frame header.
type mp3Header struct {
	version    byte // 3 = MPEG 1, 2 = MPEG 2, 0 = MPEG 2.5
	sampleRate int
	length     int
}

var (
	mp3BitratesV1 = [15]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}
	mp3BitratesV2 = [15]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}
	mp3Rates      = map[byte][3]int{3: {44100, 48000, 32000}, 2: {22050, 24000, 16000}, 0: {11025, 12000, 8000}}
)

// parseMP3Header decodes the 4 bytes at b as a Layer III frame header.
func parseMP3Header(b []byte) (mp3Header, bool) {
	if len(b) < 4 || b[0] != 0xff || b[1]&0xe0 != 0xe0 {
		return mp3Header{}, false
	}
	version := b[1] >> 3 & 3
	layer := b[1] >> 1 & 3
	bitrateIdx := b[2] >> 4
	rateIdx := b[2] >> 2 & 3
	if version == 1 || layer != 1 || bitrateIdx == 0 || bitrateIdx == 15 || rateIdx == 3 || b[3]&3 == 2 {
		return mp3Header{}, false
	}
	rate := mp3Rates[version][rateIdx]
	padding := int(b[2] >> 1 & 1)
	var length int
	if version == 3 {
		length = 144000*mp3BitratesV1[bitrateIdx]/rate + padding
	} else {
		length = 72000*mp3BitratesV2[bitrateIdx]/rate + padding
	}
	return mp3Header{version: version, sampleRate: rate, length: length}, true
}

// hasMP3Frames reports whether head holds Layer III frames: one frame followed by a matching second.
func hasMP3Frames(head []byte) bool {
	limit := min(len(head)-4, 2048)
	for i := 0; i <= limit; i++ {
		if head[i] != 0xff {
			continue
		}
		h, ok := parseMP3Header(head[i:])
		if !ok {
			continue
		}
		next := i + h.length
		if next+4 > len(head) {
			// The file ends inside this frame: accept a lone frame only at the very start.
			if i == 0 && next >= len(head)-3 && next <= len(head) {
				return true
			}
			continue
		}
		if n, ok := parseMP3Header(head[next:]); ok && n.version == h.version && n.sampleRate == h.sampleRate {
			return true
		}
	}
	return false
}

// EBML (Matroska, WebM) element identifiers used to find the track types.
const (
	ebmlHeaderID = 0x1a45dfa3
	segmentID    = 0x18538067
	tracksID     = 0x1654ae6b
	trackEntryID = 0xae
	trackTypeID  = 0x83
	clusterID    = 0x1f43b675
)

// readEBMLID reads an element ID (marker bits kept) at b[i:].
func readEBMLID(b []byte, i int) (id uint32, next int, ok bool) {
	if i >= len(b) || b[i] == 0 {
		return 0, 0, false
	}
	width := 1
	for mask := byte(0x80); width <= 4 && b[i]&mask == 0; mask >>= 1 {
		width++
	}
	if width > 4 || i+width > len(b) {
		return 0, 0, false
	}
	for _, c := range b[i : i+width] {
		id = id<<8 | uint32(c)
	}
	return id, i + width, true
}

// readEBMLSize reads an element data size at b[i:]; unknown reports the reserved all-ones value.
func readEBMLSize(b []byte, i int) (size uint64, next int, unknown, ok bool) {
	if i >= len(b) || b[i] == 0 {
		return 0, 0, false, false
	}
	width := 1
	mask := byte(0x80)
	for b[i]&mask == 0 {
		mask >>= 1
		width++
	}
	if i+width > len(b) {
		return 0, 0, false, false
	}
	size = uint64(b[i] & (mask - 1))
	allOnes := size == uint64(mask-1)
	for _, c := range b[i+1 : i+width] {
		size = size<<8 | uint64(c)
		allOnes = allOnes && c == 0xff
	}
	return size, i + width, allOnes, true
}

// webmHasVideo looks for the Tracks element in the leading bytes; known is false when it is not there in full.
func webmHasVideo(head []byte) (hasVideo, known bool) {
	id, i, ok := readEBMLID(head, 0)
	if !ok || id != ebmlHeaderID {
		return false, false
	}
	size, i, unknown, ok := readEBMLSize(head, i)
	if !ok || unknown || size > uint64(len(head)) {
		return false, false
	}
	i += int(size)
	if id, i, ok = readEBMLID(head, i); !ok || id != segmentID {
		return false, false
	}
	if _, i, _, ok = readEBMLSize(head, i); !ok {
		return false, false
	}
	for i < len(head) {
		var (
			elemID   uint32
			elemSize uint64
		)
		if elemID, i, ok = readEBMLID(head, i); !ok {
			return false, false
		}
		if elemSize, i, unknown, ok = readEBMLSize(head, i); !ok || unknown || elemID == clusterID {
			return false, false
		}
		if elemSize > uint64(len(head)) {
			return false, false
		}
		end := i + int(elemSize)
		if elemID == tracksID {
			types := trackTypes(head[i:min(end, len(head))])
			if slices.Contains(types, 1) {
				return true, true
			}
			return false, end <= len(head)
		}
		i = end
	}
	return false, false
}

// trackTypes returns the TrackType of every TrackEntry in the Tracks payload b (1 = video, 2 = audio).
func trackTypes(b []byte) []uint64 {
	var types []uint64
	for i := 0; i < len(b); {
		id, j, ok := readEBMLID(b, i)
		if !ok {
			break
		}
		size, j, unknown, ok := readEBMLSize(b, j)
		if !ok || unknown || size > uint64(len(b)) {
			break
		}
		end := min(j+int(size), len(b))
		if id == trackEntryID {
			for k := j; k < end; {
				cid, kk, ok := readEBMLID(b[:end], k)
				if !ok {
					break
				}
				csize, kk, unknown, ok := readEBMLSize(b[:end], kk)
				if !ok || unknown || kk+int(csize) > end {
					break
				}
				if cid == trackTypeID && csize > 0 && csize <= 8 {
					var v uint64
					for _, c := range b[kk : kk+int(csize)] {
						v = v<<8 | uint64(c)
					}
					types = append(types, v)
				}
				k = kk + int(csize)
			}
		}
		i = j + int(size)
	}
	return types
}
