package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"studio/jobs/internal/calls"
	"studio/jobs/routing"
	"studio/jobs/upstream"
	"studio/models"
	"studio/models/media"
)

// readingRoute routes image readings: chat upstreams that accept pictures.
var readingRoute = routing.Request{Media: upstream.MediaChat, Needs: []upstream.Capability{upstream.CapVision}}

// ReadingInput is the picture of an image reading: a URL to fetch, or the bytes of an uploaded file
// (read with ReadReadingFile).
type ReadingInput struct {
	ImageURL string
	Image    []byte
	MIME     string
}

// ReadReadingFile reads an uploaded image-reading file: png, jpg or webp decided from its bytes (400
// otherwise), at most 6 MB (413 past it, as soon as the limit is passed).
func ReadReadingFile(r io.Reader) ([]byte, string, error) {
	data, kind, err := media.ReadAll(r, media.DetectImageForReading)
	if err != nil {
		return nil, "", readingImageError("file", err, true)
	}
	return data, kind.MIME, nil
}

// readingImageError explains why an input picture was refused; over the size limit is 413 for an
// uploaded file (the request itself is too large) and 400 for an image_url.
func readingImageError(field string, err error, uploaded bool) error {
	switch {
	case errors.Is(err, media.ErrTooLarge):
		msg := fmt.Sprintf("%s is larger than %d MB, the limit of image reading", field, media.MaxReadingImageSize>>20)
		if uploaded {
			return &models.Error{Kind: models.KindTooLarge, Message: msg, Err: err}
		}
		return &models.Error{Kind: models.KindInvalid, Message: msg, Err: err}
	case errors.Is(err, media.ErrUnsupportedType):
		return &models.Error{Kind: models.KindInvalid, Message: field + " must be a png, jpg or webp picture (the type is read from its bytes)", Err: err}
	case errors.Is(err, media.ErrBlockedAddress):
		return &models.Error{Kind: models.KindInvalid, Message: field + " points at a loopback or private address, which is not allowed: " + models.PrivateURLHint, Err: err}
	case errors.Is(err, media.ErrInvalidURL):
		return &models.Error{Kind: models.KindInvalid, Message: field + " must be a public http(s) URL or a link from the upload endpoint", Err: err}
	}
	return &models.Error{Kind: models.KindInvalid, Message: field + " could not be read", Err: err}
}

// ReadImage answers POST /api/reverse (spec 4.7): it checks that a vision upstream exists and reads the
// picture, then charges one credit, asks a vision upstream chosen by routing to describe the picture,
// and refunds the credit once when every upstream of the chain failed. An answer that
// models.ParseReading cannot read counts as that upstream's failure.
func (s *Service) ReadImage(ctx context.Context, id *models.Identity, in ReadingInput) (*models.Reading, error) {
	if err := id.Require(models.CapGenerate); err != nil {
		return nil, err
	}
	if (in.ImageURL == "") == (in.Image == nil) {
		return nil, models.Invalid("send exactly one of image_url (JSON body) and file (multipart body)")
	}
	if _, err := s.Engine.Plan(readingRoute); err != nil {
		return nil, calls.RouteError(err)
	}
	img, mime := in.Image, in.MIME
	if in.ImageURL != "" {
		var err error
		if img, mime, err = s.fetchReadingImage(ctx, in.ImageURL); err != nil {
			return nil, err
		}
	}
	charge, err := s.App.ChargeReverse(ctx, id)
	if err != nil {
		return nil, err
	}
	var reading *models.Reading
	err = s.Engine.Run(ctx, readingRoute, nil, func(ctx context.Context, u *upstream.Upstream) error {
		answer, err := u.Chat().ReadImage(ctx, upstream.ReadImageRequest{Image: img, MIME: mime, Instruction: models.ReadingInstruction})
		if err != nil {
			return err
		}
		r, err := models.ParseReading(answer)
		if err != nil {
			return &upstream.Error{Class: upstream.ClassOther, Upstream: u.Name, Code: "bad_answer", Message: "unusable image reading", Err: err}
		}
		reading = r
		return nil
	})
	if err != nil {
		if _, rerr := s.App.RefundReverse(context.WithoutCancel(ctx), charge); rerr != nil {
			slog.ErrorContext(ctx, "image reading: refund failed", "ref", charge.Ref, "err", rerr)
			return nil, rerr
		}
		e := calls.Error(ctx, err, "image reading")
		var core *models.Error
		if errors.As(e, &core) {
			c := *core
			c.Message += "; the credit was refunded"
			return nil, &c
		}
		return nil, e
	}
	return reading, nil
}

// fetchReadingImage reads the picture of an image_url: from the media store when the URL is this
// service's, otherwise over the safe client.
func (s *Service) fetchReadingImage(ctx context.Context, rawURL string) ([]byte, string, error) {
	if key, ok := s.media.KeyFromURL(rawURL); ok {
		rc, _, err := s.media.Open(ctx, key)
		if err != nil {
			return nil, "", readingImageError("image_url", err, false)
		}
		defer rc.Close()
		data, kind, err := media.ReadAll(rc, media.DetectImageForReading)
		if err != nil {
			return nil, "", readingImageError("image_url", err, false)
		}
		return data, kind.MIME, nil
	}
	if err := s.App.CheckMediaURL(ctx, rawURL); err != nil {
		return nil, "", &models.Error{Kind: models.KindInvalid, Message: "image_url " + err.Error(), Err: err}
	}
	data, _, err := media.Fetch(ctx, s.client, rawURL, media.MaxReadingImageSize)
	if err != nil {
		return nil, "", readingImageError("image_url", err, false)
	}
	kind, err := media.DetectImageForReading(data)
	if err != nil {
		return nil, "", readingImageError("image_url", err, false)
	}
	return data, kind.MIME, nil
}
