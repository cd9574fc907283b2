package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"studio/models"
)

// readAllLimited reads at most limit bytes; a longer body is KindTooLarge and nothing beyond limit+1 is read.
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
	return b, nil
}
