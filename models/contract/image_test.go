package contract

import (
	"fmt"
	"testing"
)

func TestImageCost(t *testing.T) {
	tests := []struct {
		resolution string
		want       int
		wantErr    string
	}{
		{"", 1, ""},
		{"1k", 1, ""},
		{"2k", 2, ""},
		{"4k", 2, ""},
		{"2K", 0, `resolution: unknown resolution "2K"; use 1k, 2k or 4k`},
		{"8k", 0, `resolution: unknown resolution "8k"; use 1k, 2k or 4k`},
	}
	for _, tt := range tests {
		t.Run(tt.resolution, func(t *testing.T) {
			got, err := ImageCost(tt.resolution)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("ImageCost(%q) = %d, want %d", tt.resolution, got, tt.want)
			}
		})
	}
	if CostImageStandard != 1 || CostImageLarge != 2 || CostReverse != 1 || CostChat != 0 {
		t.Errorf("credit constants = %d, %d, %d, %d; want 1, 2, 1, 0", CostImageStandard, CostImageLarge, CostReverse, CostChat)
	}
}

func TestParseImageEnums(t *testing.T) {
	tests := []struct {
		name    string
		parse   func(string) (string, error)
		in      string
		want    string
		wantErr string
	}{
		{"quality default", ParseImageQuality, "", "high", ""},
		{"quality low", ParseImageQuality, "low", "low", ""},
		{"quality medium", ParseImageQuality, "medium", "medium", ""},
		{"quality unknown", ParseImageQuality, "ultra", "", `quality: unknown quality "ultra"; use low, medium or high`},
		{"quality case", ParseImageQuality, "HIGH", "", `quality: unknown quality "HIGH"; use low, medium or high`},
		{"background default", ParseImageBackground, "", "opaque", ""},
		{"background transparent", ParseImageBackground, "transparent", "transparent", ""},
		{"background unknown", ParseImageBackground, "white", "", `background: unknown background "white"; use transparent or opaque`},
		{"resolution default", ParseImageResolution, "", "1k", ""},
		{"resolution 4k", ParseImageResolution, "4k", "4k", ""},
		{"resolution unknown", ParseImageResolution, "1080p", "", `resolution: unknown resolution "1080p"; use 1k, 2k or 4k`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parse(tt.in)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("parse(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseRatio(t *testing.T) {
	for _, r := range CommonRatios() {
		if _, _, err := ParseRatio(r); err != nil {
			t.Errorf("ParseRatio(%q) = %v, want no error for a common ratio", r, err)
		}
	}
	tests := []struct {
		in   string
		w, h int
		ok   bool
	}{
		{"3:4", 3, 4, true},
		{"16:9", 16, 9, true},
		{"1920:1080", 1920, 1080, true},
		{"9999:1", 9999, 1, true},
		{"10000:1", 0, 0, false},
		{"0:1", 0, 0, false},
		{"01:1", 0, 0, false},
		{"-1:1", 0, 0, false},
		{"+1:1", 0, 0, false},
		{"1.5:1", 0, 0, false},
		{" 3:4", 0, 0, false},
		{"3 : 4", 0, 0, false},
		{"3/4", 0, 0, false},
		{"3:4:5", 0, 0, false},
		{"3:", 0, 0, false},
		{":4", 0, 0, false},
		{"", 0, 0, false},
		{"３:４", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			w, h, err := ParseRatio(tt.in)
			wantErr := ""
			if !tt.ok {
				wantErr = fmt.Sprintf("ratio: %q is not an aspect ratio W:H of positive whole numbers (for example 1:1, 3:4, 4:3, 9:16, 16:9)", tt.in)
			}
			checkErr(t, err, wantErr)
			if w != tt.w || h != tt.h {
				t.Errorf("ParseRatio(%q) = %d, %d; want %d, %d", tt.in, w, h, tt.w, tt.h)
			}
		})
	}
}
