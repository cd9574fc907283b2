package rest

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"

	"github.com/gorilla/mux"

	"studio/models"
	"studio/models/media"
)

// maxReverseBody bounds a multipart image-reading body: the 6 MB picture and its envelope.
const maxReverseBody = media.MaxReadingImageSize + 1<<20

// registerReverse adds POST /api/reverse (image reading, spec 4.7).
func (s *Server) registerReverse(api *mux.Router) {
	api.HandleFunc("/reverse", s.authed(s.reverse)).Methods(http.MethodPost)
}

func (s *Server) reverse(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	for _, name := range slices.Sorted(maps.Keys(r.URL.Query())) {
		if err := models.CheckReverseParam(name, ""); err != nil {
			return err
		}
	}
	in, err := readingInput(w, r)
	if err != nil {
		return err
	}
	reading, err := s.svc.Copy().ReadImage(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeOK(w, reading)
	return nil
}

// readingInput reads the one input of an image reading: a multipart file, or a JSON {image_url}.
func readingInput(w http.ResponseWriter, r *http.Request) (models.ReadingInput, error) {
	var in models.ReadingInput
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		return multipartReadingInput(w, r)
	}
	body, err := readBody(r, maxJSONBody)
	if err != nil {
		return in, err
	}
	var fields map[string]json.RawMessage
	if err := models.DecodeJSON(body, &fields); err != nil {
		return in, err
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if err := models.CheckReverseParam(name, "image_url"); err != nil {
			return in, err
		}
	}
	raw, ok := fields["image_url"]
	if !ok {
		return in, models.Invalid("image_url is required: send JSON {\"image_url\": ...} or a multipart body with file")
	}
	if err := json.Unmarshal(raw, &in.ImageURL); err != nil || in.ImageURL == "" {
		return in, models.Invalid("image_url must be a non-empty URL string")
	}
	return in, nil
}

// multipartReadingInput reads a multipart body holding one part, file; any other part is refused.
func multipartReadingInput(w http.ResponseWriter, r *http.Request) (models.ReadingInput, error) {
	var in models.ReadingInput
	r.Body = http.MaxBytesReader(w, r.Body, maxReverseBody)
	mr, err := r.MultipartReader()
	if err != nil {
		return in, models.Invalid("invalid multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return in, &models.Error{Kind: models.KindTooLarge, Message: "request body too large for image reading (the picture may be at most 6 MB)"}
			}
			return in, models.Invalid("invalid multipart body: %v", err)
		}
		name := part.FormName()
		if err := checkPart(name, part.FileName()); err != nil {
			return in, err
		}
		if err := models.CheckReverseParam(name, "file"); err != nil {
			return in, err
		}
		if in.Image != nil {
			return in, models.Invalid("send one file only")
		}
		if in.Image, in.MIME, err = models.ReadReadingFile(part); err != nil {
			return in, err
		}
	}
	if in.Image == nil {
		return in, models.Invalid("file is required: a png, jpg or webp picture of at most 6 MB")
	}
	return in, nil
}
