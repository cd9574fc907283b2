package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"studio/models/contract"
	"studio/models/media"
)

// Image reading (POST /api/reverse, spec 4.7): one synchronous call of a chat upstream with the vision
// capability. Its input is a JSON {image_url} or a multipart file, exactly one, and nothing else; the
// parameters removed on 2026-08-16 are refused by name. The answer has exactly the fields of Reading.
// One credit (contract.CostReverse) is charged in a transaction before the call, with a ledger
// reference of its own, and refunded once when the call fails.

// ReverseRemovedParams are the parameters no longer accepted on /api/reverse since 2026-08-16 (400).
var ReverseRemovedParams = []string{"variablize", "variables", "variable_labels", "create_template", "template", "async"}

// CheckReverseParam refuses a parameter of /api/reverse other than the one input field (image_url in a
// JSON body, file in a multipart body), naming the removed ones.
func CheckReverseParam(name, input string) error {
	switch {
	case name == input:
		return nil
	case slices.Contains(ReverseRemovedParams, name):
		return Invalid("%s is no longer accepted on /api/reverse (removed on 2026-08-16); send only image_url (JSON) or file (multipart)", name)
	case name == "image_url" || name == "file":
		return Invalid("send exactly one of image_url (JSON body) and file (multipart body), not both")
	}
	return Invalid("unknown parameter %q: /api/reverse takes only image_url (JSON body) or file (multipart body), no other parameters", name)
}

// Reading is the answer of POST /api/reverse. Its fields are fixed by spec 4.7: adding or removing
// one is an interface change.
type Reading struct {
	Sculpt      ReadingSculpt `json:"sculpt"`
	Prompt      string        `json:"prompt"`
	PromptCN    string        `json:"prompt_cn"`
	StyleTags   []string      `json:"style_tags"`
	AspectRatio string        `json:"aspect_ratio"`
	ZhName      string        `json:"zh_name"`
	Description string        `json:"description"`
	Genre       string        `json:"genre"`
	Ratio       string        `json:"ratio"`
	BodyMD      string        `json:"body_md"`
}

// ReadingSculpt is the structured description of a picture.
type ReadingSculpt struct {
	Subject     string `json:"subject"`
	Composition string `json:"composition"`
	Universe    string `json:"universe"`
	Light       string `json:"light"`
	Print       string `json:"print"`
	Texture     string `json:"texture"`
}

// ReadingInstruction is the system prompt of an image reading: it asks for the fields of Reading.
const ReadingInstruction = `You read pictures for a creative studio. Describe the picture and answer with one JSON object only, with exactly these keys:
"sculpt": {"subject", "composition", "universe", "light", "print", "texture"} (each a short English phrase: the subject, the composition, the setting or world, the lighting, the print or medium, the texture),
"prompt": a complete English image prompt that recreates the picture,
"prompt_cn": the same prompt in Chinese,
"style_tags": an array of short style tags,
"aspect_ratio": the picture's aspect ratio as W:H (for example 3:4),
"zh_name": a short Chinese name for the picture,
"description": one English sentence,
"genre": one word naming the genre,
"ratio": the same W:H ratio,
"body_md": a short Markdown description.`

// ParseReading reads a chat upstream's answer as a Reading. The answer may wrap the JSON object in
// prose or a code fence; style_tags may be one comma-separated string, and aspect_ratio and ratio
// stand in for each other. An answer without a JSON object, a sculpt object or a prompt is an error.
func ParseReading(answer string) (*Reading, error) {
	obj, err := answerObject(answer)
	if err != nil {
		return nil, err
	}
	r := &Reading{}
	raw, ok := obj["sculpt"]
	var sculpt map[string]json.RawMessage
	if !ok || json.Unmarshal(raw, &sculpt) != nil || sculpt == nil {
		return nil, errors.New("reverse: the answer has no sculpt object")
	}
	lower := make(map[string]json.RawMessage, len(sculpt))
	for k, v := range sculpt {
		lower[strings.ToLower(strings.TrimSpace(k))] = v
	}
	r.Sculpt = ReadingSculpt{Subject: textField(lower, "subject"), Composition: textField(lower, "composition"),
		Universe: textField(lower, "universe"), Light: textField(lower, "light"), Print: textField(lower, "print"),
		Texture: textField(lower, "texture")}
	r.Prompt = textField(obj, "prompt")
	if r.Prompt == "" {
		return nil, errors.New("reverse: the answer has no prompt")
	}
	r.PromptCN = textField(obj, "prompt_cn")
	r.AspectRatio = textField(obj, "aspect_ratio")
	r.Ratio = textField(obj, "ratio")
	if r.AspectRatio == "" {
		r.AspectRatio = r.Ratio
	}
	if r.Ratio == "" {
		r.Ratio = r.AspectRatio
	}
	r.ZhName = textField(obj, "zh_name")
	r.Description = textField(obj, "description")
	r.Genre = textField(obj, "genre")
	r.BodyMD = textField(obj, "body_md")
	r.StyleTags = styleTags(obj["style_tags"])
	return r, nil
}

// styleTags returns the distinct non-blank tags of an array of strings or of one comma-separated
// string; never nil, so that the answer always holds an array.
func styleTags(raw json.RawMessage) []string {
	var list []string
	var s string
	if json.Unmarshal(raw, &s) == nil {
		list = strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '，' || r == '、' })
	} else {
		_ = json.Unmarshal(raw, &list)
	}
	out := make([]string, 0, len(list))
	for _, t := range list {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// ReverseCharge is the credit taken for one image reading, kept so that a failure refunds exactly it.
type ReverseCharge struct {
	// Ref is the ledger reference of the charge and of its refund.
	Ref      string
	identity Identity
	charge   Charge
}

// ChargeReverse takes the credit of one image reading from the identity and counts the call in usage
// (reverse), in one transaction. Insufficient credits are KindInsufficientCredits and nothing is taken.
func (cs *CopyService) ChargeReverse(ctx context.Context, id *Identity) (*ReverseCharge, error) {
	a := cs.a
	rc := &ReverseCharge{Ref: "reverse:" + NewID(), identity: *id}
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		c, err := a.Credits().ChargeTx(tx, id, contract.CostReverse, rc.Ref, "image reading")
		if err != nil {
			return err
		}
		rc.charge = c
		return a.Credits().RecordUsageTx(tx, id.TenantID, ServiceReverse, id.Agent)
	})
	if err != nil {
		return nil, asCoreError("reverse: charge", err)
	}
	return rc, nil
}

// RefundReverse returns the credit of a failed image reading. It refunds at most once per charge: the
// charge's ledger rows are locked and a refund already written under its reference makes it a no-op.
// It reports whether this call refunded.
func (cs *CopyService) RefundReverse(ctx context.Context, rc *ReverseCharge) (bool, error) {
	a := cs.a
	if rc == nil || rc.charge.Amount <= 0 {
		return false, nil
	}
	refunded := false
	err := a.Tx(ctx, func(tx *gorm.DB) error {
		refunded = false // the transaction may be run again after a deadlock
		var charged []LedgerEntry
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("ref = ? AND kind = ?", rc.Ref, LedgerCharge).
			Find(&charged).Error; err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&LedgerEntry{}).Where("ref = ? AND kind = ?", rc.Ref, LedgerRefund).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		id := rc.identity
		if err := a.Credits().RefundTx(tx, id.TenantID, id.AccountID, id.UserID, rc.charge, rc.Ref, "image reading failed"); err != nil {
			return err
		}
		refunded = true
		return nil
	})
	if err != nil {
		return false, asCoreError(fmt.Sprintf("reverse: refund %s", rc.Ref), err)
	}
	return refunded, nil
}

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
		return nil, "", ReadingImageError("file", err, true)
	}
	return data, kind.MIME, nil
}

// ReadingImageError explains why an input picture was refused; over the size limit is 413 for an
// uploaded file (the request itself is too large) and 400 for an image_url.
func ReadingImageError(field string, err error, uploaded bool) error {
	switch {
	case errors.Is(err, media.ErrTooLarge):
		msg := fmt.Sprintf("%s is larger than %d MB, the limit of image reading", field, media.MaxReadingImageSize>>20)
		if uploaded {
			return &Error{Kind: KindTooLarge, Message: msg, Err: err}
		}
		return &Error{Kind: KindInvalid, Message: msg, Err: err}
	case errors.Is(err, media.ErrUnsupportedType):
		return &Error{Kind: KindInvalid, Message: field + " must be a png, jpg or webp picture (the type is read from its bytes)", Err: err}
	case errors.Is(err, media.ErrBlockedAddress):
		return &Error{Kind: KindInvalid, Message: field + " points at a loopback or private address, which is not allowed: " + PrivateURLHint, Err: err}
	case errors.Is(err, media.ErrInvalidURL):
		return &Error{Kind: KindInvalid, Message: field + " must be a public http(s) URL or a link from the upload endpoint", Err: err}
	}
	return &Error{Kind: KindInvalid, Message: field + " could not be read", Err: err}
}

// ReadImage answers POST /api/reverse (spec 4.7): it checks that a vision upstream exists and reads the
// picture, then charges one credit, asks a vision upstream chosen by routing to describe the picture,
// and refunds the credit once when every upstream of the chain failed. An answer ParseReading cannot
// read counts as that upstream's failure.
func (cs *CopyService) ReadImage(ctx context.Context, id *Identity, in ReadingInput) (*Reading, error) {
	if err := id.Require(CapGenerate); err != nil {
		return nil, err
	}
	if (in.ImageURL == "") == (in.Image == nil) {
		return nil, Invalid("send exactly one of image_url (JSON body) and file (multipart body)")
	}
	r, err := cs.a.router()
	if err != nil {
		return nil, err
	}
	if err := r.PlanChat(true); err != nil {
		return nil, err
	}
	img, mime := in.Image, in.MIME
	if in.ImageURL != "" {
		if img, mime, err = r.FetchPicture(ctx, in.ImageURL); err != nil {
			return nil, err
		}
	}
	charge, err := cs.ChargeReverse(ctx, id)
	if err != nil {
		return nil, err
	}
	var reading *Reading
	err = r.ReadPicture(ctx, "image reading", img, mime, ReadingInstruction, func(answer string) error {
		got, err := ParseReading(answer)
		reading = got
		return err
	})
	if err != nil {
		if _, rerr := cs.RefundReverse(context.WithoutCancel(ctx), charge); rerr != nil {
			slog.ErrorContext(ctx, "image reading: refund failed", "ref", charge.Ref, "err", rerr)
			return nil, rerr
		}
		var core *Error
		if errors.As(err, &core) {
			c := *core
			c.Message += "; the credit was refunded"
			return nil, &c
		}
		return nil, err
	}
	return reading, nil
}
