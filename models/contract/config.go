package contract

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"
)

// Copy formats of 2.3 and 4.6.
const (
	// FormatXiaohongshu is the xiaohongshu note format: title, body and hashtags.
	FormatXiaohongshu = "xiaohongshu"
	// FormatWechat is the wechat article format: title and body.
	FormatWechat = "wechat"
	// FormatDetail is the product detail format: title and body.
	FormatDetail = "detail"
	// FormatScript is the script format: title and body.
	FormatScript = "script"
)

// ArticleFormat is a copy format and the fields POST /api/article returns for it.
type ArticleFormat struct {
	Format         string   `json:"format"`
	ReturnedFields []string `json:"returned_fields"`
}

// articleFormats is the format table of 4.6.
var articleFormats = []ArticleFormat{
	{FormatXiaohongshu, []string{"title", "body", "hashtags"}},
	{FormatWechat, []string{"title", "body"}},
	{FormatDetail, []string{"title", "body"}},
	{FormatScript, []string{"title", "body"}},
}

// ArticleFormats returns a copy of the copy formats with their returned fields.
func ArticleFormats() []ArticleFormat {
	out := make([]ArticleFormat, len(articleFormats))
	for i, f := range articleFormats {
		out[i] = ArticleFormat{f.Format, slices.Clone(f.ReturnedFields)}
	}
	return out
}

// ArticleFormatByName returns the copy format with the given name.
func ArticleFormatByName(name string) (ArticleFormat, bool) {
	for _, f := range ArticleFormats() {
		if f.Format == name {
			return f, true
		}
	}
	return ArticleFormat{}, false
}

// ImageConfig is one generation config of an image template (2.3).
type ImageConfig struct {
	Model                  string   `json:"model,omitempty"`
	PromptTemplate         string   `json:"prompt_template,omitempty"`
	Fields                 []Field  `json:"fields,omitempty"`
	SkillSpecMD            string   `json:"skill_spec_md,omitempty"`
	RefRequired            bool     `json:"ref_required,omitempty"`
	DefaultReferenceImages []string `json:"default_reference_images,omitempty"`
	Quality                string   `json:"quality,omitempty"`
}

// Validate checks the config at template creation: model ("" or "auto" is
// routing), the generation mode, reference image URLs and quality.
func (c ImageConfig) Validate() error {
	if err := validateModelName(c.Model); err != nil {
		return err
	}
	if _, err := ModeOf(c.PromptTemplate, c.Fields, c.SkillSpecMD); err != nil {
		return err
	}
	for i, u := range c.DefaultReferenceImages {
		if err := validateHTTPURL(fmt.Sprintf("default_reference_images[%d]", i), u); err != nil {
			return err
		}
	}
	if c.Quality != "" {
		if _, err := ParseImageQuality(c.Quality); err != nil {
			return err
		}
	}
	return nil
}

// ArticleConfig is one generation config of a copy template (2.3).
type ArticleConfig struct {
	Format         string  `json:"format"`
	PromptTemplate string  `json:"prompt_template,omitempty"`
	Fields         []Field `json:"fields,omitempty"`
	SkillSpecMD    string  `json:"skill_spec_md,omitempty"`
}

// Validate checks the config at template creation: the format and the generation mode.
func (c ArticleConfig) Validate() error {
	if c.Format == "" {
		return invalid("format", "a format is required; use %s", orList(articleFormatNames()))
	}
	if _, ok := ArticleFormatByName(c.Format); !ok {
		return invalid("format", "unknown format %q; use %s", c.Format, orList(articleFormatNames()))
	}
	_, err := ModeOf(c.PromptTemplate, c.Fields, c.SkillSpecMD)
	return err
}

// VideoConfig is one generation config of a video template (2.3, D7).
type VideoConfig struct {
	Model          string  `json:"model,omitempty"`
	Ratio          string  `json:"ratio,omitempty"`
	Duration       int     `json:"duration,omitempty"`
	Resolution     string  `json:"resolution,omitempty"`
	PromptTemplate string  `json:"prompt_template,omitempty"`
	Fields         []Field `json:"fields,omitempty"`
	SkillSpecMD    string  `json:"skill_spec_md,omitempty"`
}

// Validate checks the config at template creation: model is "auto" ("" means
// auto) or a tier code, ratio is W:H, and a locked tier offers the duration
// and resolution, or with auto some tier does. Duration 0 leaves the duration
// to the submit; resolution "" means the tier's default.
func (c VideoConfig) Validate() error {
	if c.Ratio != "" {
		if _, _, err := ParseRatio(c.Ratio); err != nil {
			return err
		}
	}
	if c.Duration < 0 {
		return invalid("duration", "must be a positive number of seconds, or absent")
	}
	if _, err := pickTier(c.Model, c.Duration, c.Resolution); err != nil {
		return err
	}
	_, err := ModeOf(c.PromptTemplate, c.Fields, c.SkillSpecMD)
	return err
}

// validateModelName checks an image model value: empty, auto, or a name without spaces.
func validateModelName(model string) error {
	if strings.ContainsFunc(model, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return invalid("model", "%q is not a model name; use %s, a model family or a channel name", model, ModelAuto)
	}
	return nil
}

// validateHTTPURL checks that s is an absolute http or https URL with a host.
func validateHTTPURL(path, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(s, " \t\r\n") {
		return invalid(path, "%q is not an http or https URL", s)
	}
	return nil
}

// articleFormatNames returns the copy format names in table order.
func articleFormatNames() []string {
	names := make([]string, len(articleFormats))
	for i, f := range articleFormats {
		names[i] = f.Format
	}
	return names
}
