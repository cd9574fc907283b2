package contract

import (
	"slices"
	"strconv"
)

// Contracts is the body of GET /api/doc-contracts: the contracts of this
// package, built from the same values that validation uses.
type Contracts struct {
	Fields          FieldStandard   `json:"field_standard"`
	PlaceholderRule string          `json:"placeholder_rule"`
	Modes           []ModeContract  `json:"generation_modes"`
	Whitelist       []Variable      `json:"variable_whitelist"`
	VideoTiers      []TierContract  `json:"video_tiers"`
	VideoAutoModel  string          `json:"video_auto_model"`
	Image           ImageContract   `json:"image_request"`
	ArticleFormats  []ArticleFormat `json:"article_formats"`
	Credits         CreditContract  `json:"credits"`
}

// FieldStandard describes a fields item (2.3) and the rules applied to it.
type FieldStandard struct {
	Members         []FieldMember `json:"members"`
	KeyPattern      string        `json:"key_pattern"`
	Types           []string      `json:"types"`
	DefaultType     string        `json:"default_type"`
	SkillTypes      []string      `json:"skill_types"`
	RequiredDefault bool          `json:"required_default"`
	OptionForms     []string      `json:"option_forms"`
	Rules           []string      `json:"rules"`
}

// FieldMember describes one member of a fields item.
type FieldMember struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	Note     string `json:"note"`
}

// ModeContract describes one generation mode.
type ModeContract struct {
	Mode    Mode     `json:"mode"`
	Members []string `json:"members"`
	Note    string   `json:"note"`
}

// TierContract is a video tier with its credits per second at each resolution it offers.
type TierContract struct {
	Tier
	CreditsPerSecond []ResolutionCost `json:"credits_per_second"`
}

// ImageContract lists the image request enums of 4.2 and D6 with their defaults.
type ImageContract struct {
	Ratios            []string `json:"ratios"`
	RatioRule         string   `json:"ratio_rule"`
	Qualities         []string `json:"qualities"`
	DefaultQuality    string   `json:"default_quality"`
	Backgrounds       []string `json:"backgrounds"`
	DefaultBackground string   `json:"default_background"`
	Resolutions       []string `json:"resolutions"`
	DefaultResolution string   `json:"default_resolution"`
}

// CreditContract lists the credit costs of section 8, D6 and D7.
type CreditContract struct {
	ImagePerResolution    []ResolutionCost `json:"image_per_resolution"`
	Reverse               int              `json:"reverse"`
	Chat                  int              `json:"chat"`
	VideoPerSecond        []ResolutionCost `json:"video_per_second"`
	VideoSecondsRoundedUp bool             `json:"video_seconds_rounded_up"`
}

// Document returns the contracts served by GET /api/doc-contracts.
func Document() Contracts {
	var tierDocs []TierContract
	for _, t := range Tiers() {
		doc := TierContract{Tier: t}
		for _, r := range t.Resolutions {
			cost, _ := VideoCostPerSecond(r)
			doc.CreditsPerSecond = append(doc.CreditsPerSecond, ResolutionCost{r, cost})
		}
		tierDocs = append(tierDocs, doc)
	}
	return Contracts{
		Fields: FieldStandard{
			Members: []FieldMember{
				{"key", "string", true, "variable name replacing {key}; matches key_pattern; unique"},
				{"label", "string", true, "form display name; not blank"},
				{"type", "enum", false, "text, textarea or select; default text"},
				{"placeholder", "string", false, "example hint"},
				{"help", "string", false, "note under the field"},
				{"required", "boolean", false, "default true; false = optional"},
				{"options", "array", false, "required and non-empty when type is select; only allowed then"},
			},
			KeyPattern:      KeyPattern,
			Types:           slices.Clone(fieldTypes),
			DefaultType:     FieldText,
			SkillTypes:      slices.Clone(skillFieldTypes),
			RequiredDefault: true,
			OptionForms: []string{
				`string "value|label" (split at the first "|"; without "|" the value is also the label)`,
				`object {"label": string, "value": string} (label defaults to value)`,
			},
			Rules: []string{
				"a prompt_template with placeholders but no fields is rejected",
				"every placeholder of prompt_template is declared in fields",
				"every required field is used in prompt_template",
				"option values are non-blank and unique within a field",
				"at generation, a required field that is absent, null or blank returns 400 (missing required field: key)",
				"at generation, values are strings, numbers or booleans; a select value is one of its option values",
				"empty optional fields substitute the empty string",
			},
		},
		Modes: []ModeContract{
			{ModeForm, []string{"prompt_template", "fields"}, "the server substitutes {key} placeholders with the form values, with no model call; preferred"},
			{ModeSpec, []string{"skill_spec_md"}, "a model expands the user's one-sentence description; skill_spec_md is never sent to tenants; fields are not allowed"},
		},
		Whitelist:      Whitelist(),
		VideoTiers:     tierDocs,
		VideoAutoModel: ModelAuto,
		Image: ImageContract{
			Ratios:            CommonRatios(),
			RatioRule:         "any W:H of positive whole numbers up to " + strconv.Itoa(MaxRatioTerm) + " without leading zeros",
			Qualities:         ImageQualities(),
			DefaultQuality:    QualityHigh,
			Backgrounds:       ImageBackgrounds(),
			DefaultBackground: BackgroundOpaque,
			Resolutions:       resolutionNames(imageCosts),
			DefaultResolution: ImageResolution1k,
		},
		ArticleFormats: ArticleFormats(),
		Credits: CreditContract{
			ImagePerResolution:    ImageResolutions(),
			Reverse:               CostReverse,
			Chat:                  CostChat,
			VideoPerSecond:        VideoResolutions(),
			VideoSecondsRoundedUp: true,
		},
		PlaceholderRule: "a placeholder is {key} with key matching key_pattern and nothing else between the braces; " +
			"any other brace is literal text; templates are substituted in one left-to-right pass and values are never re-scanned; " +
			"repeated roles of the variable whitelist are numbered key_2, key_3, ...",
	}
}
