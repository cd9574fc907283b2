package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"studio/models/contract"
)

// ImageToTemplateRequest is the body of POST /api/image-to-template.
type ImageToTemplateRequest struct {
	ImageURL string `json:"image_url"`
	ZhName   string `json:"zh_name"`
	Slug     string `json:"slug"`
	Category string `json:"category"`
}

// ImageToTemplateCost is the credit cost of one image-to-template job.
const ImageToTemplateCost = 1

// PrepareImageToTemplate validates an image-to-template request; it is charged 1 credit like image reading.
func (js *JobService) PrepareImageToTemplate(ctx context.Context, id *Identity, req ImageToTemplateRequest) (*PreparedImage, error) {
	a := js.a
	if err := id.Require(CapImageToTemplate); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.ImageURL) == "" {
		return nil, Invalid("image_url is required: upload the picture first (POST /api/upload-ref)")
	}
	if err := a.Jobs().CheckMediaURL(ctx, req.ImageURL); err != nil {
		return nil, Invalid("image_url: %s", err.Error())
	}
	if len([]rune(req.ZhName)) > 100 {
		return nil, Invalid("zh_name is too long (at most 100 characters)")
	}
	p := ImageParams{SourceImage: req.ImageURL, TemplateName: strings.TrimSpace(req.ZhName), TemplateSlug: strings.TrimSpace(req.Slug),
		TemplateCategory: strings.TrimSpace(req.Category), Ratio: "1:1"}
	return &PreparedImage{Params: p, Credits: ImageToTemplateCost, Kind: JobKindImageToTemplate}, nil
}

// TemplateDraft is what the image reading proposed for the new template.
type TemplateDraft struct {
	ZhName      string
	Description string
	Prompt      string
	Ratio       string
	Genre       string
	Roles       []string // proposed placeholder roles, in order
}

// CompleteImageToTemplate creates the template from the draft and marks the job done, in one transaction.
func (js *JobService) CompleteImageToTemplate(ctx context.Context, jobID string, d TemplateDraft) error {
	a := js.a
	return a.completeJob(ctx, jobID, func(tx *gorm.DB, j *Job) (map[string]any, error) {
		p, _ := j.JobParams()
		keys := contract.NormalizePlaceholders(d.Roles)
		if len(keys) == 0 {
			keys = []string{"title"}
		}
		meaning := map[string]string{}
		for _, v := range contract.Whitelist() {
			meaning[v.Name] = v.Meaning
		}
		var b strings.Builder
		b.WriteString(strings.TrimSpace(d.Prompt))
		fields := make([]contract.Field, 0, len(keys))
		for _, k := range keys {
			base := contract.BaseName(k)
			label := meaning[base]
			if k != base {
				label += " " + strings.TrimPrefix(k, base+"_")
			}
			if base == "style" {
				fmt.Fprintf(&b, "\nStyle and colour tone: {%s}.", k)
			} else {
				fmt.Fprintf(&b, "\n%s text: \"{%s}\".", strings.ToUpper(label[:1])+label[1:], k)
			}
			fields = append(fields, contract.Field{Key: k, Label: label})
		}
		cfg := contract.ImageConfig{Model: "auto", PromptTemplate: b.String(), Fields: fields}
		cfgs, _ := json.Marshal([]contract.ImageConfig{cfg})
		name := p.TemplateName
		if name == "" {
			name = d.ZhName
		}
		if name == "" {
			name = "图片模板"
		}
		owner := &Identity{}
		if j.TenantID != nil {
			owner.Kind, owner.TenantID = IdentityTenant, *j.TenantID
		} else {
			owner.Kind, owner.UserID = IdentityUser, derefString(j.UserID)
		}
		in := TemplateInput{Type: "image", ZhName: name, Description: d.Description, Ratio: d.Ratio, Genre: d.Genre,
			Category: p.TemplateCategory, SampleImages: []string{p.SourceImage}, GenerationConfigs: cfgs}
		in.Slug = p.TemplateSlug
		t, err := a.Templates().CreateTemplateTx(tx, owner, in)
		if err != nil {
			return nil, err
		}
		return map[string]any{"result_ref": t.ID, "cdn_url": p.SourceImage}, nil
	})
}
