package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"studio/models"
)

// readAllLimited reads at most limit bytes; a longer body is KindTooLarge and nothing beyond limit+1 is read.
// It is the one place where the REST surface reads a request body it decodes as JSON (decode, readBody),
// whatever the request's Content-Type says (curl -d sends application/x-www-form-urlencoded): every
// string and object key of the body, escapes decoded, is checked here (models.CheckJSONText) before any
// endpoint sees it, so a NUL character or invalid UTF-8 is refused with 400 naming the field and never
// reaches the database. The text guard in front of every surface (cmd/server/httpmw) checks the same,
// for the surfaces that do not read their bodies here.
func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &models.Error{Kind: models.KindTooLarge, Message: fmt.Sprintf("request body too large (limit %d bytes)", limit)}
		}
		return nil, models.Invalid("could not read the request body: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, &models.Error{Kind: models.KindTooLarge, Message: fmt.Sprintf("request body too large (limit %d bytes)", limit)}
	}
	if err := models.CheckJSONText(b); err != nil {
		return nil, err
	}
	return b, nil
}

// maxPartName bounds the field name and the file name of a multipart part.
const maxPartName = 255

// checkPart refuses a multipart part whose field name or file name cannot be stored or logged as text (a
// NUL character, invalid UTF-8) or is longer than maxPartName bytes, before its name is used.
func checkPart(name, filename string) error {
	for _, f := range []struct{ what, v string }{{"multipart field name", name}, {"multipart file name", filename}} {
		if err := models.CheckText(f.what, f.v); err != nil {
			return err
		}
		if len(f.v) > maxPartName {
			return models.Invalid("%s is too long: at most %d bytes", f.what, maxPartName)
		}
	}
	return nil
}
