package httpmw

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"studio/models"
)

// checkedHeaders are the request headers whose values may be stored or looked up in the database.
var checkedHeaders = []string{"Authorization", "X-API-Key", "Idempotency-Key", "X-CS-Agent"}

// TextGuard refuses, before any surface decodes it, a request carrying text that PostgreSQL cannot store
// (a NUL character, invalid UTF-8) in its path, query string, credentials, form fields or JSON body
// (REST bodies, GraphQL variables, console forms; a body is checked as JSON whatever its Content-Type
// says, and as a form too when it says so): refuse answers 400 {"error": ...} naming the field,
// and nothing changes. Bodies are read up to maxBody bytes (the largest text body a surface accepts); a
// longer one passes to its endpoint, whose own bound refuses it. Multipart fields are checked where they
// are decoded, with the same rule (models.CheckText).
func TextGuard(next http.Handler, maxBody int64, refuse Refuse) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkRequestText(r, maxBody); err != nil {
			refuse(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func checkRequestText(r *http.Request, maxBody int64) error {
	if err := models.CheckText("URL path", r.URL.Path); err != nil {
		return err
	}
	if r.URL.RawQuery != "" {
		if err := models.CheckValues("query", r.URL.Query()); err != nil {
			return err
		}
	}
	for _, h := range checkedHeaders {
		if v := r.Header.Get(h); v != "" {
			if err := models.CheckText(h+" header", v); err != nil {
				return err
			}
		}
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	form := ct == "application/x-www-form-urlencoded"
	if !form && (strings.HasPrefix(ct, "multipart/") || strings.HasPrefix(ct, "image/") ||
		strings.HasPrefix(ct, "video/") || ct == "application/octet-stream") {
		return nil
	}
	body, err := readBody(r.Body, r.ContentLength, maxBody)
	orig := r.Body
	if err == nil && int64(len(body)) <= maxBody {
		r.Body = &Buffered{Reader: bytes.NewReader(body), Closer: orig, body: body}
	} else {
		rest := io.Reader(orig)
		if err != nil {
			rest = errReader{err}
		}
		r.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(body), rest), Closer: orig}
		return nil // the endpoint meets the same error or bound when it reads
	}
	if form {
		if vals, err := url.ParseQuery(string(body)); err == nil {
			if err := models.CheckValues("form", vals); err != nil {
				return err
			}
		}
	}
	// Whatever the Content-Type says, a body that is JSON is checked as JSON: the REST surface and
	// GraphQL decode a JSON body sent as a form (curl -d), as text/plain or with no type at all.
	return models.CheckJSONText(body)
}

// Buffered is a request body that the guard read whole: handlers that want the bytes take Bytes()
// instead of reading (and copying) them again; reading it gives the same bytes.
type Buffered struct {
	*bytes.Reader
	io.Closer
	body []byte
}

// Bytes returns the whole body; the caller must not change it.
func (b *Buffered) Bytes() []byte { return b.body }

// preallocMax bounds the buffer readBody sets aside from a declared length before any byte arrived:
// a client that declares a large body and sends nothing must not make the server reserve it.
const preallocMax = 1 << 20

// readBody reads at most maxBody+1 bytes of a body, into one buffer of the declared length when the
// request declares one within the bound and preallocMax (no growing and copying, which a large body pays
// many times); larger bodies grow as their bytes arrive.
func readBody(body io.Reader, declared, maxBody int64) ([]byte, error) {
	if declared <= 0 || declared > maxBody || declared > preallocMax {
		return io.ReadAll(io.LimitReader(body, maxBody+1))
	}
	buf := make([]byte, declared, declared+1)
	n, err := io.ReadFull(body, buf)
	if err != nil {
		return buf[:n], err
	}
	// A body longer than it declared is cut by net/http; one more byte tells, and keeps the bound.
	var one [1]byte
	if m, _ := body.Read(one[:]); m > 0 {
		rest, err := io.ReadAll(io.LimitReader(body, maxBody-declared))
		return append(append(buf, one[0]), rest...), err
	}
	return buf, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
