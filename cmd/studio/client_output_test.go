package main

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputFileIsWhatItsNameSays checks that -o writes the format its extension names: converted
// between PNG, JPEG and GIF, refused with the extension to use otherwise, and an unknown extension
// refused before anything is submitted.
func TestOutputFileIsWhatItsNameSays(t *testing.T) {
	ts := startServer(t, nil)
	clientEnv(t, ts.srv.URL, ts.tenantKey(20))
	dir := t.TempDir()
	magic := map[string][]byte{"png": []byte("\x89PNG\r\n\x1a\n"), "jpeg": {0xff, 0xd8, 0xff}, "gif": []byte("GIF8")}
	formats := map[string]bool{}
	for _, c := range []struct{ name, format string }{{"fox.png", "png"}, {"fox.jpg", "jpeg"}, {"fox.JPEG", "jpeg"}, {"fox.gif", "gif"}} {
		out := filepath.Join(dir, c.name)
		run("generate", "--prompt", "a red fox", "--ratio", "1:1", "-o", out).expect(t, exitOK)
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, magic[c.format]) {
			t.Errorf("-o %s wrote a file starting %q, want %s", c.name, data[:min(8, len(data))], c.format)
		}
		_, got, err := image.Decode(bytes.NewReader(data))
		if err != nil || got != c.format {
			t.Errorf("-o %s: decoded as %q (%v), want %s", c.name, got, err, c.format)
		}
		formats[c.format] = true
	}
	if len(formats) != 3 {
		t.Fatalf("formats written = %v", formats)
	}
	// WebP cannot be written by the client: refused, naming the extension to use, nothing written.
	webp := filepath.Join(dir, "fox.webp")
	r := run("generate", "--prompt", "a red fox", "--ratio", "1:1", "-o", webp)
	if r.code == exitOK || !strings.Contains(r.err, "-o "+filepath.Join(dir, "fox.")) || !strings.Contains(r.err, "not saved as "+webp) {
		t.Fatalf("-o fox.webp for a PNG or JPEG result: exit %d\nstderr: %s", r.code, r.err)
	}
	if _, err := os.Stat(webp); !os.IsNotExist(err) {
		t.Fatalf("fox.webp was written: %v", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".studio-download-*")); len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
	// An extension that names no format the command writes is refused before anything is charged.
	before := run("balance", "--json").expect(t, exitOK).json(t)
	if r := run("generate", "--prompt", "a red fox", "-o", filepath.Join(dir, "fox.bmp")).expect(t, exitUsage); !strings.Contains(r.err, ".png") {
		t.Fatalf("-o fox.bmp: %s", r.err)
	}
	if r := run("video", "--prompt", "waves", "--duration", "4", "-o", filepath.Join(dir, "clip.png")).expect(t, exitUsage); !strings.Contains(r.err, ".mp4") {
		t.Fatalf("video -o clip.png: %s", r.err)
	}
	if after := run("balance", "--json").expect(t, exitOK).json(t); before["credits"] == nil || after["credits"] != before["credits"] {
		t.Fatalf("credits %v -> %v: a refused -o still charged", before["credits"], after["credits"])
	}
}
