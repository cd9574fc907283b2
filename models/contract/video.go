package contract

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Video resolutions of D7, as sent in the submit field resolution.
const (
	// VideoResolution480p is 480p output, 1 credit per second.
	VideoResolution480p = "480p"
	// VideoResolution720p is 720p output, 2 credits per second.
	VideoResolution720p = "720p"
	// VideoResolution1080p is 1080p output, 3 credits per second.
	VideoResolution1080p = "1080p"
	// VideoResolution768P is 768P output (tier B), 2 credits per second.
	VideoResolution768P = "768P"
	// VideoResolution2K is 2K output (tier B), 3 credits per second.
	VideoResolution2K = "2K"
)

// ModelAuto is the model value that lets the service choose (routing for images, a tier for videos).
const ModelAuto = "auto"

// ResolutionCost is the credit cost of one resolution: per image for images, per second for videos.
type ResolutionCost struct {
	Resolution string `json:"resolution"`
	Credits    int    `json:"credits"`
}

// videoCosts lists the video resolutions of D7 with their credits per second.
var videoCosts = []ResolutionCost{
	{VideoResolution480p, 1},
	{VideoResolution720p, 2},
	{VideoResolution768P, 2},
	{VideoResolution1080p, 3},
	{VideoResolution2K, 3},
}

// Tier is a video model tier of 4.5: its code, display name, inclusive
// duration range in seconds and resolutions, cheapest first.
type Tier struct {
	Code        string   `json:"code"`
	Name        string   `json:"name"`
	MinDuration int      `json:"min_duration"`
	MaxDuration int      `json:"max_duration"`
	Resolutions []string `json:"resolutions"`
}

// tiers is the tier table of 4.5 in its published order, which also breaks cost ties.
var tiers = []Tier{
	{"vidA-2-0-pro-260801", "Tier A 2.0", 4, 15, []string{VideoResolution480p}},
	{"vidA-2-0-fast-260801", "Tier A 2.0 Fast", 4, 15, []string{VideoResolution480p, VideoResolution720p}},
	{"vidA-2-0-mini-260801", "Tier A 2.0 Mini", 4, 15, []string{VideoResolution480p, VideoResolution720p}},
	{"vidA-2-5-pro-260801", "Tier A 2.5", 4, 30, []string{VideoResolution720p, VideoResolution1080p}},
	{"vidB-H3", "Tier B H3", 4, 15, []string{VideoResolution768P, VideoResolution2K}},
}

// Tiers returns a copy of the video tier table in its published order.
func Tiers() []Tier {
	out := make([]Tier, len(tiers))
	for i, t := range tiers {
		out[i] = t.clone()
	}
	return out
}

// TierByCode returns the tier with the given code.
func TierByCode(code string) (Tier, bool) {
	for _, t := range tiers {
		if t.Code == code {
			return t.clone(), true
		}
	}
	return Tier{}, false
}

// clone returns a copy of t that shares no slice with the table.
func (t Tier) clone() Tier {
	t.Resolutions = slices.Clone(t.Resolutions)
	return t
}

// DefaultResolution returns the resolution used when a request names none: the tier's cheapest.
func (t Tier) DefaultResolution() string {
	return t.Resolutions[0]
}

// Check reports whether the tier offers the duration in seconds and the
// resolution; an empty resolution means the tier's default.
func (t Tier) Check(duration int, resolution string) error {
	if duration < t.MinDuration || duration > t.MaxDuration {
		return invalid("duration", "%d s is outside %d–%d s for tier %s (%s)", duration, t.MinDuration, t.MaxDuration, t.Code, t.Name)
	}
	if resolution != "" && !slices.Contains(t.Resolutions, resolution) {
		return invalid("resolution", "%s is not offered by tier %s (%s); it offers %s", resolution, t.Code, t.Name, orList(t.Resolutions))
	}
	return nil
}

// VideoResolutions returns the video resolutions with their credits per second, cheapest first.
func VideoResolutions() []ResolutionCost {
	return slices.Clone(videoCosts)
}

// VideoCostPerSecond returns the credits charged per second of video at a resolution.
func VideoCostPerSecond(resolution string) (int, error) {
	for _, c := range videoCosts {
		if c.Resolution == resolution {
			return c.Credits, nil
		}
	}
	return 0, invalid("resolution", "unknown video resolution %q; use %s", resolution, orList(resolutionNames(videoCosts)))
}

// VideoCost returns the credits for a video of the given length at a
// resolution, with seconds rounded up to whole seconds.
func VideoCost(resolution string, seconds float64) (int, error) {
	perSecond, err := VideoCostPerSecond(resolution)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(seconds) || seconds < 0 || seconds > 24*3600 {
		return 0, invalid("duration", "%v s is not a valid video length", seconds)
	}
	return perSecond * int(math.Ceil(seconds)), nil
}

// PickTier returns the tier for a video request. A tier code locks that tier,
// which must offer the duration and resolution. Model "" or "auto" picks the
// tier that fits and costs the fewest credits per second (at the requested
// resolution, or at each tier's default when none is requested), ties going to
// the earlier tier in the table. Errors are *ValidationError values.
func PickTier(model string, duration int, resolution string) (Tier, error) {
	if duration <= 0 {
		return Tier{}, invalid("duration", "must be a positive number of seconds")
	}
	return pickTier(model, duration, resolution)
}

// pickTier implements PickTier; duration 0 leaves the duration unconstrained.
func pickTier(model string, duration int, resolution string) (Tier, error) {
	if resolution != "" {
		if _, err := VideoCostPerSecond(resolution); err != nil {
			return Tier{}, err
		}
	}
	if model != "" && model != ModelAuto {
		t, ok := TierByCode(model)
		if !ok {
			return Tier{}, invalid("model", "unknown video model %q; use %s or a tier code: %s", model, ModelAuto, strings.Join(tierCodes(), ", "))
		}
		if duration == 0 {
			duration = t.MinDuration
		}
		return t, t.Check(duration, resolution)
	}
	best, bestCost := -1, 0
	for i, t := range tiers {
		d := duration
		if d == 0 {
			d = t.MinDuration
		}
		if t.Check(d, resolution) != nil {
			continue
		}
		r := resolution
		if r == "" {
			r = t.DefaultResolution()
		}
		cost, _ := VideoCostPerSecond(r)
		if best < 0 || cost < bestCost {
			best, bestCost = i, cost
		}
	}
	if best < 0 {
		return Tier{}, noTierFits(duration, resolution)
	}
	return tiers[best].clone(), nil
}

// noTierFits explains why no tier offers a duration and resolution.
func noTierFits(duration int, resolution string) error {
	lo, hi := 0, 0
	for _, t := range tiers {
		if resolution != "" && !slices.Contains(t.Resolutions, resolution) {
			continue
		}
		if lo == 0 || t.MinDuration < lo {
			lo = t.MinDuration
		}
		hi = max(hi, t.MaxDuration)
	}
	if resolution == "" {
		return invalid("duration", "no video tier offers %d s; durations range %d–%d s", duration, lo, hi)
	}
	return invalid("duration", "no video tier offers %d s at %s; tiers with %s allow %d–%d s", duration, resolution, resolution, lo, hi)
}

// tierCodes returns the tier codes in table order.
func tierCodes() []string {
	codes := make([]string, len(tiers))
	for i, t := range tiers {
		codes[i] = t.Code
	}
	return codes
}

// resolutionNames returns the resolutions of a cost table in order.
func resolutionNames(costs []ResolutionCost) []string {
	names := make([]string, len(costs))
	for i, c := range costs {
		names[i] = c.Resolution
	}
	return names
}

// expectedVideoTime is how long each tier usually takes to generate a five-second clip; the progress of
// a task whose upstream reports none is the time elapsed against it (ExpectedVideoTime).
var expectedVideoTime = map[string]time.Duration{
	"vidA-2-0-pro-260801":  120 * time.Second,
	"vidA-2-0-fast-260801": 60 * time.Second,
	"vidA-2-0-mini-260801": 45 * time.Second,
	"vidA-2-5-pro-260801":  150 * time.Second,
	"vidB-H3":              90 * time.Second,
}

// ExpectedVideoTime returns how long a video of the tier and duration is expected to take: the tier's
// time for five seconds, in proportion to longer clips (two minutes for an unknown tier).
func ExpectedVideoTime(tier string, duration int) time.Duration {
	d, ok := expectedVideoTime[tier]
	if !ok {
		d = 2 * time.Minute
	}
	if duration > 5 {
		d = d * time.Duration(duration) / 5
	}
	return d
}
