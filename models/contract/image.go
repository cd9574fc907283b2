package contract

import (
	"slices"
	"strconv"
	"strings"
)

// Credit costs of section 8 and D6; the ledger charges these numbers.
const (
	// CostImageStandard is the credits per image at standard resolution (1k).
	CostImageStandard = 1
	// CostImageLarge is the credits per image at large resolution (2k, 4k).
	CostImageLarge = 2
	// CostReverse is the credits per image reading or style fission call.
	CostReverse = 1
	// CostChat is the credits per assistant chat call: chat is free.
	CostChat = 0
)

// Image request enums of 4.2 and D6.
const (
	// QualityLow is the low image quality.
	QualityLow = "low"
	// QualityMedium is the medium image quality.
	QualityMedium = "medium"
	// QualityHigh is the high image quality, the default since 2026-08-27.
	QualityHigh = "high"
	// BackgroundTransparent asks for a PNG with an alpha channel.
	BackgroundTransparent = "transparent"
	// BackgroundOpaque is the default background, recorded to state intent.
	BackgroundOpaque = "opaque"
	// ImageResolution1k is standard image resolution, the default.
	ImageResolution1k = "1k"
	// ImageResolution2k is large image resolution.
	ImageResolution2k = "2k"
	// ImageResolution4k is large image resolution.
	ImageResolution4k = "4k"
)

// qualities lists the image qualities, lowest first.
var qualities = []string{QualityLow, QualityMedium, QualityHigh}

// backgrounds lists the image backgrounds.
var backgrounds = []string{BackgroundTransparent, BackgroundOpaque}

// imageCosts lists the image resolutions with their credits per image.
var imageCosts = []ResolutionCost{
	{ImageResolution1k, CostImageStandard},
	{ImageResolution2k, CostImageLarge},
	{ImageResolution4k, CostImageLarge},
}

// commonRatios lists the aspect ratios clients are offered; ParseRatio accepts any W:H.
var commonRatios = []string{"1:1", "3:4", "4:3", "9:16", "16:9", "2:3", "3:2", "4:5", "5:4", "21:9"}

// MaxRatioTerm is the largest number allowed on either side of an aspect ratio.
const MaxRatioTerm = 9999

// ImageQualities returns the accepted image qualities, lowest first.
func ImageQualities() []string { return slices.Clone(qualities) }

// ImageBackgrounds returns the accepted image backgrounds.
func ImageBackgrounds() []string { return slices.Clone(backgrounds) }

// ImageResolutions returns the image resolutions with their credits per image.
func ImageResolutions() []ResolutionCost { return slices.Clone(imageCosts) }

// CommonRatios returns the aspect ratios offered to clients; others of the form W:H are accepted too.
func CommonRatios() []string { return slices.Clone(commonRatios) }

// ParseImageQuality returns the quality to use: the given one, or high when empty.
func ParseImageQuality(s string) (string, error) {
	return parseEnum("quality", s, QualityHigh, qualities)
}

// ParseImageBackground returns the background to use: the given one, or opaque when empty.
func ParseImageBackground(s string) (string, error) {
	return parseEnum("background", s, BackgroundOpaque, backgrounds)
}

// ParseImageResolution returns the image resolution to use: the given one, or 1k when empty.
func ParseImageResolution(s string) (string, error) {
	return parseEnum("resolution", s, ImageResolution1k, resolutionNames(imageCosts))
}

// ImageCost returns the credits per image at a resolution ("" means 1k);
// quality does not change the cost.
func ImageCost(resolution string) (int, error) {
	r, err := ParseImageResolution(resolution)
	if err != nil {
		return 0, err
	}
	for _, c := range imageCosts {
		if c.Resolution == r {
			return c.Credits, nil
		}
	}
	return 0, invalid("resolution", "unknown image resolution %q", resolution)
}

// ParseRatio reads an aspect ratio "W:H" of two positive integers up to
// MaxRatioTerm without signs, spaces or leading zeros.
func ParseRatio(s string) (w, h int, err error) {
	ws, hs, ok := strings.Cut(s, ":")
	if ok {
		w, ok = ratioTerm(ws)
	}
	if ok {
		h, ok = ratioTerm(hs)
	}
	if !ok {
		return 0, 0, invalid("ratio", "%q is not an aspect ratio W:H of positive whole numbers (for example %s)", s, strings.Join(commonRatios[:5], ", "))
	}
	return w, h, nil
}

// ratioTerm reads one side of an aspect ratio.
func ratioTerm(s string) (int, bool) {
	if s == "" || s[0] == '0' || len(s) > 4 {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= MaxRatioTerm
}

// parseEnum returns s when it is one of allowed, def when s is empty, and an error otherwise.
func parseEnum(path, s, def string, allowed []string) (string, error) {
	if s == "" {
		return def, nil
	}
	if slices.Contains(allowed, s) {
		return s, nil
	}
	return "", invalid(path, "unknown %s %q; use %s", path, s, orList(allowed))
}
