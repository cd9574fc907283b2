package upstream

import (
	"encoding/binary"
)

// writeMJPEGMP4 wraps JPEG frames in a minimal ISO base media (MP4) file with one Motion-JPEG video
// track; the moov box comes first so players can start before the whole file arrives.
func writeMJPEGMP4(frames [][]byte, width, height, frameMS int) []byte {
	const timescale = 1000
	duration := uint32(len(frames) * frameMS)
	ftyp := box("ftyp", []byte("isom"), u32(0x200), []byte("isom"), []byte("iso2"), []byte("mp41"))
	var dataLen int
	for _, f := range frames {
		dataLen += len(f)
	}
	build := func(offset uint32) []byte {
		sizes := make([]byte, 0, 12+4*len(frames))
		sizes = append(sizes, u32(0)...) // version and flags
		sizes = append(sizes, u32(0)...) // every sample has its own size
		sizes = append(sizes, u32(uint32(len(frames)))...)
		for _, f := range frames {
			sizes = append(sizes, u32(uint32(len(f)))...)
		}
		sampleEntry := box("jpeg",
			make([]byte, 6), u16(1), // reserved, data_reference_index
			make([]byte, 16), // pre_defined, reserved, pre_defined[3]
			u16(uint16(width)), u16(uint16(height)),
			u32(0x00480000), u32(0x00480000), // 72 dpi
			u32(0), u16(1), // reserved, frame_count
			compressorName("Photo - JPEG"),
			u16(0x0018), u16(0xffff),
		)
		stbl := box("stbl",
			box("stsd", u32(0), u32(1), sampleEntry),
			box("stts", u32(0), u32(1), u32(uint32(len(frames))), u32(uint32(frameMS))),
			box("stsc", u32(0), u32(1), u32(1), u32(uint32(len(frames))), u32(1)),
			box("stsz", sizes),
			box("stco", u32(0), u32(1), u32(offset)),
		)
		minf := box("minf",
			box("vmhd", u32(1), make([]byte, 8)),
			box("dinf", box("dref", u32(0), u32(1), box("url ", u32(1)))),
			stbl,
		)
		mdia := box("mdia",
			box("mdhd", u32(0), u32(0), u32(0), u32(timescale), u32(duration), u16(0x55c4), u16(0)),
			box("hdlr", u32(0), u32(0), []byte("vide"), make([]byte, 12), []byte("VideoHandler\x00")),
			minf,
		)
		tkhd := box("tkhd", u32(3), u32(0), u32(0), u32(1), u32(0), u32(duration),
			make([]byte, 8), u16(0), u16(0), u16(0), u16(0), matrix(),
			u32(uint32(width)<<16), u32(uint32(height)<<16))
		mvhd := box("mvhd", u32(0), u32(0), u32(0), u32(timescale), u32(duration),
			u32(0x00010000), u16(0x0100), u16(0), make([]byte, 8), matrix(), make([]byte, 24), u32(2))
		return box("moov", mvhd, box("trak", tkhd, mdia))
	}
	moovLen := len(build(0))
	offset := uint32(len(ftyp) + moovLen + 8)
	moov := build(offset)
	out := make([]byte, 0, len(ftyp)+len(moov)+8+dataLen)
	out = append(out, ftyp...)
	out = append(out, moov...)
	out = append(out, u32(uint32(8+dataLen))...)
	out = append(out, "mdat"...)
	for _, f := range frames {
		out = append(out, f...)
	}
	return out
}

// box returns an MP4 box of the given type around the concatenated parts.
func box(typ string, parts ...[]byte) []byte {
	n := 8
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	b = append(b, u32(uint32(n))...)
	b = append(b, typ...)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// u32 returns v in big-endian order.
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// u16 returns v in big-endian order.
func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// matrix returns the identity transformation matrix of mvhd and tkhd.
func matrix() []byte {
	m := make([]byte, 0, 36)
	for _, v := range []uint32{0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000} {
		m = append(m, u32(v)...)
	}
	return m
}

// compressorName returns the 32-byte Pascal string of a visual sample entry.
func compressorName(s string) []byte {
	b := make([]byte, 32)
	b[0] = byte(len(s))
	copy(b[1:], s)
	return b
}
