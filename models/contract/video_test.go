package contract

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestTierTable(t *testing.T) {
	want := []Tier{
		{"vidA-2-0-pro-260801", "Tier A 2.0", 4, 15, []string{"480p"}},
		{"vidA-2-0-fast-260801", "Tier A 2.0 Fast", 4, 15, []string{"480p", "720p"}},
		{"vidA-2-0-mini-260801", "Tier A 2.0 Mini", 4, 15, []string{"480p", "720p"}},
		{"vidA-2-5-pro-260801", "Tier A 2.5", 4, 30, []string{"720p", "1080p"}},
		{"vidB-H3", "Tier B H3", 4, 15, []string{"768P", "2K"}},
	}
	got := Tiers()
	if len(got) != len(want) {
		t.Fatalf("len(Tiers()) = %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Code != want[i].Code || got[i].Name != want[i].Name || got[i].MinDuration != want[i].MinDuration ||
			got[i].MaxDuration != want[i].MaxDuration || !slices.Equal(got[i].Resolutions, want[i].Resolutions) {
			t.Errorf("Tiers()[%d] = %+v, want %+v", i, got[i], want[i])
		}
		// Resolutions are listed cheapest first, so DefaultResolution is the cheapest.
		costs := make([]int, len(got[i].Resolutions))
		for j, r := range got[i].Resolutions {
			costs[j], _ = VideoCostPerSecond(r)
		}
		if !slices.IsSorted(costs) {
			t.Errorf("tier %s resolutions %q are not cheapest first", got[i].Code, got[i].Resolutions)
		}
	}
	got[0].Resolutions[0] = "changed"
	if tb, _ := TierByCode(want[0].Code); tb.Resolutions[0] != "480p" {
		t.Errorf("Tiers shares slices with the table, want a copy")
	}
	if _, ok := TierByCode("vidA-unknown"); ok {
		t.Errorf("TierByCode(unknown) ok = true, want false")
	}
}

func TestPickTierLocked(t *testing.T) {
	type row struct {
		duration   int
		resolution string
		wantErr    string
	}
	for _, tier := range Tiers() {
		var rows []row
		for _, d := range []int{3, 4, 15, 16, 30, 31} {
			wantErr := ""
			if d < tier.MinDuration || d > tier.MaxDuration {
				wantErr = fmt.Sprintf("duration: %d s is outside %d–%d s for tier %s (%s)", d, tier.MinDuration, tier.MaxDuration, tier.Code, tier.Name)
			}
			rows = append(rows, row{d, "", wantErr})
			for _, r := range tier.Resolutions {
				rows = append(rows, row{d, r, wantErr})
			}
		}
		for _, tt := range rows {
			t.Run(fmt.Sprintf("%s/%ds/%q", tier.Code, tt.duration, tt.resolution), func(t *testing.T) {
				got, err := PickTier(tier.Code, tt.duration, tt.resolution)
				checkErr(t, err, tt.wantErr)
				if err == nil && got.Code != tier.Code {
					t.Errorf("PickTier = %s, want %s", got.Code, tier.Code)
				}
			})
		}
	}
	tests := []struct {
		name       string
		model      string
		duration   int
		resolution string
		wantErr    string
	}{
		{"brief example", "vidA-2-5-pro-260801", 31, "720p", "duration: 31 s is outside 4–30 s for tier vidA-2-5-pro-260801 (Tier A 2.5)"},
		{"resolution not offered", "vidA-2-0-fast-260801", 10, "1080p", "resolution: 1080p is not offered by tier vidA-2-0-fast-260801 (Tier A 2.0 Fast); it offers 480p or 720p"},
		{"pro offers only 480p", "vidA-2-0-pro-260801", 10, "720p", "resolution: 720p is not offered by tier vidA-2-0-pro-260801 (Tier A 2.0); it offers 480p"},
		{"unknown resolution", "vidB-H3", 10, "2k", `resolution: unknown video resolution "2k"; use 480p, 720p, 768P, 1080p or 2K`},
		{"unknown tier", "vidA-3", 10, "", `model: unknown video model "vidA-3"; use auto or a tier code: vidA-2-0-pro-260801, vidA-2-0-fast-260801, vidA-2-0-mini-260801, vidA-2-5-pro-260801, vidB-H3`},
		{"zero duration", "vidB-H3", 0, "", "duration: must be a positive number of seconds"},
		{"negative duration", "auto", -5, "", "duration: must be a positive number of seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PickTier(tt.model, tt.duration, tt.resolution)
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestPickTierAuto(t *testing.T) {
	const (
		pro  = "vidA-2-0-pro-260801"
		fast = "vidA-2-0-fast-260801"
		a25  = "vidA-2-5-pro-260801"
		h3   = "vidB-H3"
	)
	tests := []struct {
		duration   int
		resolution string
		want       string
		wantErr    string
	}{
		{3, "", "", "duration: no video tier offers 3 s; durations range 4–30 s"},
		{4, "", pro, ""},
		{15, "", pro, ""},
		{16, "", a25, ""},
		{30, "", a25, ""},
		{31, "", "", "duration: no video tier offers 31 s; durations range 4–30 s"},
		{3, "480p", "", "duration: no video tier offers 3 s at 480p; tiers with 480p allow 4–15 s"},
		{4, "480p", pro, ""},
		{15, "480p", pro, ""},
		{16, "480p", "", "duration: no video tier offers 16 s at 480p; tiers with 480p allow 4–15 s"},
		{4, "720p", fast, ""},
		{15, "720p", fast, ""},
		{16, "720p", a25, ""},
		{30, "720p", a25, ""},
		{31, "720p", "", "duration: no video tier offers 31 s at 720p; tiers with 720p allow 4–30 s"},
		{4, "1080p", a25, ""},
		{30, "1080p", a25, ""},
		{31, "1080p", "", "duration: no video tier offers 31 s at 1080p; tiers with 1080p allow 4–30 s"},
		{4, "768P", h3, ""},
		{15, "2K", h3, ""},
		{16, "2K", "", "duration: no video tier offers 16 s at 2K; tiers with 2K allow 4–15 s"},
		{10, "4K", "", `resolution: unknown video resolution "4K"; use 480p, 720p, 768P, 1080p or 2K`},
	}
	for _, model := range []string{"", "auto"} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%q/%ds/%q", model, tt.duration, tt.resolution), func(t *testing.T) {
				got, err := PickTier(model, tt.duration, tt.resolution)
				checkErr(t, err, tt.wantErr)
				if got.Code != tt.want {
					t.Errorf("PickTier(%q, %d, %q) = %q, want %q", model, tt.duration, tt.resolution, got.Code, tt.want)
				}
			})
		}
	}
}

func TestVideoCost(t *testing.T) {
	tests := []struct {
		resolution string
		seconds    float64
		want       int
		wantErr    string
	}{
		{"480p", 5, 5, ""},
		{"480p", 4.2, 5, ""},
		{"720p", 10, 20, ""},
		{"768P", 10.01, 22, ""},
		{"1080p", 30, 90, ""},
		{"2K", 15, 45, ""},
		{"2K", 0, 0, ""},
		{"2k", 5, 0, `resolution: unknown video resolution "2k"; use 480p, 720p, 768P, 1080p or 2K`},
		{"", 5, 0, `resolution: unknown video resolution ""; use 480p, 720p, 768P, 1080p or 2K`},
		{"480p", -1, 0, "duration: -1 s is not a valid video length"},
		{"480p", math.NaN(), 0, "duration: NaN s is not a valid video length"},
		{"480p", math.Inf(1), 0, "duration: +Inf s is not a valid video length"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.resolution, tt.seconds), func(t *testing.T) {
			got, err := VideoCost(tt.resolution, tt.seconds)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("VideoCost(%q, %v) = %d, want %d", tt.resolution, tt.seconds, got, tt.want)
			}
		})
	}
	want := map[string]int{"480p": 1, "720p": 2, "768P": 2, "1080p": 3, "2K": 3}
	for _, c := range VideoResolutions() {
		if want[c.Resolution] != c.Credits {
			t.Errorf("VideoResolutions %s = %d, want %d", c.Resolution, c.Credits, want[c.Resolution])
		}
		delete(want, c.Resolution)
	}
	if len(want) != 0 {
		t.Errorf("VideoResolutions misses %v", want)
	}
}
