package main

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// pngDepth reads the bit depth and colour type of a PNG's IHDR chunk.
func pngDepth(t *testing.T, data []byte) (depth, colorType byte) {
	t.Helper()
	if len(data) < 33 || !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) || string(data[12:16]) != "IHDR" {
		t.Fatalf("not a PNG: %q", data[:min(16, len(data))])
	}
	if w := binary.BigEndian.Uint32(data[16:20]); w == 0 {
		t.Fatalf("PNG of width 0")
	}
	return data[24], data[25]
}

// TestSavedPNGKeepsEightBitDepth checks that -o x.png writes an 8-bit PNG from an 8-bit image: a PNG
// result is kept byte for byte, a JPEG (YCbCr) or GIF (paletted) result is converted without doubling
// its depth (the encoder writes 16-bit samples for colour models it does not know), so the file is not
// twice the size of an 8-bit encoding of the same picture.
func TestSavedPNGKeepsEightBitDepth(t *testing.T) {
	const w, h = 120, 90
	rgba := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			rgba.Set(x, y, color.RGBA{R: uint8(x * 2), G: uint8(y * 2), B: uint8((x * y) % 251), A: 255})
		}
	}
	var pngBytes, jpegBytes, gifBytes bytes.Buffer
	if err := png.Encode(&pngBytes, rgba); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jpegBytes, rgba, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	pal := image.NewPaletted(rgba.Bounds(), palette.Plan9)
	for y := range h {
		for x := range w {
			pal.Set(x, y, rgba.At(x, y))
		}
	}
	if err := gif.Encode(&gifBytes, pal, nil); err != nil {
		t.Fatal(err)
	}
	// The size of an 8-bit RGB encoding of the JPEG's picture: the converted file must not be twice it.
	decoded, err := jpeg.Decode(bytes.NewReader(jpegBytes.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	eight := image.NewNRGBA(decoded.Bounds())
	for y := range h {
		for x := range w {
			eight.Set(x, y, decoded.At(x, y))
		}
	}
	var eightBytes bytes.Buffer
	if err := png.Encode(&eightBytes, eight); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		in    []byte
		limit int // the converted file is at most this many bytes
	}{
		{"png", pngBytes.Bytes(), pngBytes.Len()},
		{"jpeg", jpegBytes.Bytes(), eightBytes.Len() * 5 / 4},
		{"gif", gifBytes.Bytes(), eightBytes.Len()},
	} {
		tmp := filepath.Join(dir, ".studio-download-"+c.name)
		if err := os.WriteFile(tmp, c.in, 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, c.name+".png")
		if err := saveOutput(tmp, out); err != nil {
			t.Fatalf("%s -> png: %v", c.name, err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if depth, ct := pngDepth(t, data); depth != 8 {
			t.Errorf("%s -> png: bit depth %d (colour type %d), want 8", c.name, depth, ct)
		}
		if len(data) > c.limit {
			t.Errorf("%s -> png: %d bytes, want at most %d (an 8-bit encoding)", c.name, len(data), c.limit)
		}
		if c.name == "png" && !bytes.Equal(data, c.in) {
			t.Errorf("a PNG result was re-encoded: %d bytes -> %d", len(c.in), len(data))
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil || img.Bounds().Dx() != w || img.Bounds().Dy() != h {
			t.Fatalf("%s -> png: decoded %v, %v", c.name, img.Bounds(), err)
		}
	}
}
