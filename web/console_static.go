package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
)

// staticFiles are the stylesheet, the console script, the icon (favicon.ico) and the vendored htmx (npm htmx.org 2.0.11,
// dist/htmx.min.js), served from the binary under /static/.
//
//go:embed static
var staticFiles embed.FS

// staticFS is staticFiles rooted at static/.
var staticFS = func() fs.FS {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err)
	}
	return sub
}()

// staticVersions holds a short content hash per file, appended to its URL so that a long cache lifetime
// never serves an old file after an upgrade.
var staticVersions = func() map[string]string {
	out := map[string]string{}
	_ = fs.WalkDir(staticFS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(staticFS, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[path] = hex.EncodeToString(sum[:6])
		return nil
	})
	return out
}()

// staticURL returns the versioned URL of a static file.
func staticURL(name string) string { return "/static/" + name + "?v=" + staticVersions[name] }

// staticHandler serves the static files with a year-long, immutable cache lifetime (the URLs carry the
// content hash); directories are not listed.
func staticHandler() http.Handler {
	files := http.StripPrefix("/static/", http.FileServerFS(staticFS))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/static/")
		if _, ok := staticVersions[name]; !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		files.ServeHTTP(w, r)
	})
}

// faviconHandler answers /favicon.ico, where browsers look for the icon of a page without one (and of
// a non-HTML answer), with the embedded icon the pages link to; it may be cached for a day.
func faviconHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(staticFS, "favicon.ico")
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/x-icon")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(b)
		}
	})
}
