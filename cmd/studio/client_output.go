package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Formats a result may be saved in, by the extension of -o.
var (
	imageExts = map[string]string{".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".webp": "webp"}
	videoExts = map[string]string{".mp4": "mp4", ".mov": "mov", ".webm": "webm"}
	// formatExt is the extension to suggest for a format.
	formatExt = map[string]string{"png": ".png", "jpeg": ".jpg", "gif": ".gif", "webp": ".webp", "mp4": ".mp4", "mov": ".mov", "webm": ".webm"}
)

// checkOutputName refuses, before anything is submitted, an -o name whose extension is not one of exts;
// a name without an extension is written as downloaded.
func checkOutputName(path string, exts map[string]string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if path == "" || ext == "" || exts[ext] != "" {
		return nil
	}
	var known []string
	for e := range exts {
		known = append(known, e)
	}
	slices.Sort(known)
	return usageError("-o %s: the file's extension decides its format; use one of %s", path, strings.Join(known, ", "))
}

// sniffFormat names the format of a downloaded file from its first bytes ("" when unknown).
func sniffFormat(head []byte) string {
	if len(head) >= 12 && string(head[4:8]) == "ftyp" {
		if string(head[8:12]) == "qt  " {
			return "mov"
		}
		return "mp4"
	}
	switch http.DetectContentType(head) {
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpeg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	case "video/webm":
		return "webm"
	}
	return ""
}

// saveOutput moves the downloaded file tmp to path in the format path's extension names: as it is when
// the formats agree (or path has no known extension), converted between PNG, JPEG and GIF for images,
// and otherwise refused with the extension to use instead (tmp is then left for the caller to remove).
func saveOutput(tmp, path string) error {
	want := imageExts[strings.ToLower(filepath.Ext(path))]
	if want == "" {
		want = videoExts[strings.ToLower(filepath.Ext(path))]
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	f.Close()
	got := sniffFormat(head[:n])
	if want == "" || got == want || got == "" {
		return os.Rename(tmp, path)
	}
	suggest := strings.TrimSuffix(path, filepath.Ext(path)) + formatExt[got]
	if want == "webp" || got == "webp" || videoExts[formatExt[got]] != "" || videoExts[formatExt[want]] != "" {
		return fmt.Errorf("not saved as %s: the result is %s, which the client cannot write as %s; use -o %s",
			path, strings.ToUpper(got), strings.ToUpper(want), suggest)
	}
	data, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not saved as %s: the %s result could not be read for conversion (%v); use -o %s", path, strings.ToUpper(got), err, suggest)
	}
	var buf bytes.Buffer
	switch want {
	case "png":
		err = png.Encode(&buf, eightBit(img))
	case "jpeg":
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 92})
	case "gif":
		err = gif.Encode(&buf, img, nil)
	}
	if err != nil {
		return fmt.Errorf("convert to %s: %w", strings.ToUpper(want), err)
	}
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// eightBit returns img in a colour model the PNG encoder writes with 8-bit samples: gray, paletted,
// RGBA and NRGBA images as they are; any other (a JPEG's YCbCr or CMYK), which the encoder would write
// with 16-bit samples at twice the size, drawn onto an 8-bit NRGBA image.
func eightBit(img image.Image) image.Image {
	switch img.ColorModel() {
	case color.GrayModel, color.RGBAModel, color.NRGBAModel, color.AlphaModel:
		return img
	}
	if _, ok := img.ColorModel().(color.Palette); ok {
		return img
	}
	out := image.NewNRGBA(img.Bounds())
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	return out
}
