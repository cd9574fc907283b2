package upstream

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const validFile = `upstreams:
  - name: img-gen2-a
    provider: alpha
    media: image
    family: gen2
    protocol: openai
    base_url: http://127.0.0.1:9001/v1/
    api_key: ${STUDIO_TEST_ALPHA_KEY}
    model: gpt-image-1
    capabilities: [reference_images, transparent, quality]
    soft_timeout: 30s
    cost_usd: 0.04
    rating: 0.8
  - name: vid-1
    provider: beta
    media: video
    protocol: builtin
    tiers: [vidA-2-0-pro-260801, vidB-H3]
  - name: chat-1
    media: chat
    protocol: builtin
    latency: 5ms
`

func TestParseValidFile(t *testing.T) {
	t.Setenv("STUDIO_TEST_ALPHA_KEY", "sk-alpha")
	cfgs, err := Parse("upstreams.yaml", []byte(validFile))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(cfgs) != 3 {
		t.Fatalf("got %d upstreams, want 3", len(cfgs))
	}
	a := cfgs[0]
	if a.APIKey != "sk-alpha" {
		t.Errorf("api_key: got %q, want the expanded environment value", a.APIKey)
	}
	if a.BaseURL != "http://127.0.0.1:9001/v1" {
		t.Errorf("base_url: got %q, want the trailing slash trimmed", a.BaseURL)
	}
	if a.SoftTimeout != 30*time.Second || a.Rating != 0.8 || a.CostUSD != 0.04 {
		t.Errorf("got soft_timeout %v rating %v cost %v", a.SoftTimeout, a.Rating, a.CostUSD)
	}
	if !a.Has(CapTransparent) || a.Has(CapMask) {
		t.Errorf("capabilities: got %v", a.Capabilities)
	}
	v := cfgs[1]
	if v.Rating != DefaultRating || v.SoftTimeout != DefaultSoftTimeout {
		t.Errorf("defaults: got rating %v soft_timeout %v, want %v and %v", v.Rating, v.SoftTimeout, DefaultRating, DefaultSoftTimeout)
	}
	if !v.Serves(TierBH3) || v.Serves(TierA25Pro) {
		t.Errorf("tiers: got %v", v.Tiers)
	}
	if c := cfgs[2]; c.Provider != "local" || c.Latency != 5*time.Millisecond {
		t.Errorf("builtin chat: got provider %q latency %v", c.Provider, c.Latency)
	}
}

func TestParseErrors(t *testing.T) {
	entry := func(extra string) string {
		return "upstreams:\n  - name: a\n    provider: p\n    media: image\n    family: f\n    protocol: builtin\n" + extra
	}
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"bad media", `upstreams:
  - name: a
    media: image
    family: f
    protocol: builtin
  - name: b
    media: audio
    protocol: builtin
`, "upstreams.yaml:7: upstreams[1].media: must be image, video or chat"},
		{"bad protocol", entry("  - name: b\n    media: chat\n    protocol: grpc\n"), "upstreams.yaml:9: upstreams[1].protocol: must be one of openai, builtin"},
		{"duplicate name", entry("  - name: a\n    media: chat\n    protocol: builtin\n"), `upstreams.yaml:7: upstreams[1].name: duplicate name "a" (also upstreams[0])`},
		{"unknown capability", entry("    capabilities: [reference_images, sparkles]\n"), `upstreams.yaml:7: upstreams[0].capabilities[1]: unknown capability "sparkles" for image`},
		{"video capability on image", entry("    capabilities: [generate_audio]\n"), `upstreams[0].capabilities[0]: unknown capability "generate_audio" for image`},
		{"unknown tier", "upstreams:\n  - name: v\n    media: video\n    protocol: builtin\n    tiers: [vidA-2-0-pro-260801, vidC]\n", `upstreams.yaml:5: upstreams[0].tiers[1]: unknown tier "vidC"`},
		{"video without tiers", "upstreams:\n  - name: v\n    media: video\n    protocol: builtin\n", "upstreams.yaml:2: upstreams[0].tiers: a video upstream must serve at least one tier"},
		{"openai without base_url", "upstreams:\n  - name: o\n    provider: p\n    media: chat\n    protocol: openai\n    model: m\n", "upstreams.yaml:2: upstreams[0].base_url: is required for the openai protocol"},
		{"bad base_url", "upstreams:\n  - name: o\n    provider: p\n    media: chat\n    protocol: openai\n    model: m\n    base_url: ftp://x\n", "upstreams.yaml:7: upstreams[0].base_url: must be an http or https URL"},
		{"missing media", "upstreams:\n  - name: o\n    protocol: builtin\n", "upstreams.yaml:2: upstreams[0].media: is required"},
		{"unknown field", entry("    colour: red\n"), "upstreams.yaml:7: upstreams[0].colour: unknown field"},
		{"bad rating", entry("    rating: 1.5\n"), "upstreams.yaml:7: upstreams[0].rating: must be a number from 0 to 1"},
		{"bad soft_timeout", entry("    soft_timeout: soon\n"), "upstreams.yaml:7: upstreams[0].soft_timeout: must be a duration such as 60s"},
		{"negative cost", entry("    cost_usd: -1\n"), "upstreams.yaml:7: upstreams[0].cost_usd: must be a number of at least 0"},
		{"unset variable", entry("    api_key: ${STUDIO_TEST_SURELY_UNSET}\n"), "upstreams.yaml:7: upstreams[0].api_key: environment variable STUDIO_TEST_SURELY_UNSET is not set"},
		{"image without family", "upstreams:\n  - name: i\n    media: image\n    protocol: builtin\n", "upstreams.yaml:2: upstreams[0].family: is required for image upstreams"},
		{"empty list", "upstreams: []\n", "upstreams.yaml:1: upstreams: must list at least one upstream"},
		{"not a list", "upstreams: yes\n", "upstreams.yaml:1: upstreams: must be a list"},
		{"unknown top key", "servers: []\n", "upstreams.yaml:1: servers: unknown field"},
		{"reserved name", "upstreams:\n  - name: auto\n    media: chat\n    protocol: builtin\n", `upstreams.yaml:2: upstreams[0].name: "auto" is reserved`},
		{"yaml syntax", "upstreams:\n  - name: [\n", "upstreams.yaml: yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("upstreams.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tt.want)
			}
		})
	}
}

func TestBuiltinUpstreams(t *testing.T) {
	cfgs := BuiltinUpstreams()
	if err := Validate(cfgs); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	served := map[string]bool{}
	var transparent, image, chat int
	for _, c := range cfgs {
		if c.Protocol != ProtocolBuiltin {
			t.Errorf("%s: protocol %q, want builtin", c.Name, c.Protocol)
		}
		if c.Has(CapMask) {
			t.Errorf("%s: no builtin upstream may offer mask", c.Name)
		}
		switch c.Media {
		case MediaImage:
			image++
			if c.Family != "gen2" {
				t.Errorf("%s: family %q, want gen2", c.Name, c.Family)
			}
			if c.Has(CapTransparent) {
				transparent++
			}
		case MediaChat:
			chat++
		}
		for _, tier := range c.Tiers {
			served[tier] = true
		}
	}
	if image != 2 || transparent != 1 || chat == 0 {
		t.Errorf("got %d image (%d transparent) and %d chat upstreams", image, transparent, chat)
	}
	for _, tier := range TierCodes {
		if !served[tier] {
			t.Errorf("no builtin upstream serves tier %s", tier)
		}
	}
}

func TestRegistryReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "upstreams.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("upstreams:\n  - name: c1\n    media: chat\n    protocol: builtin\n")
	reg, err := LoadRegistry(path)
	if err != nil {
		t.Fatalf("LoadRegistry: %v", err)
	}
	old := reg.Current()
	held := old.ByName("c1")

	write("upstreams:\n  - name: c2\n    media: chat\n    protocol: builtin\n")
	if err := reg.Reload(path); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if reg.Current().ByName("c2") == nil || reg.Current().ByName("c1") != nil {
		t.Errorf("after reload got %v, want only c2", reg.Current().All)
	}
	if held.Name != "c1" || old.ByName("c1") != held {
		t.Error("work in flight lost its upstream")
	}

	write("upstreams:\n  - name: c3\n    media: telepathy\n    protocol: builtin\n")
	err = reg.Reload(path)
	if err == nil || !strings.Contains(err.Error(), ":3: upstreams[0].media") {
		t.Errorf("got %v, want a media error on line 3", err)
	}
	if reg.Current().ByName("c2") == nil {
		t.Error("a rejected file replaced the current upstreams")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reg.Watch(ctx, path, 5*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	write("upstreams:\n  - name: c4\n    media: chat\n    protocol: builtin\n  - name: c5\n    media: chat\n    protocol: builtin\n")
	deadline := time.Now().Add(2 * time.Second)
	for reg.Current().ByName("c5") == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if reg.Current().ByName("c5") == nil {
		t.Error("Watch did not reload the changed file")
	}

	builtin, err := LoadRegistry("")
	if err != nil || len(builtin.Current().All) != len(BuiltinUpstreams()) {
		t.Errorf("LoadRegistry(\"\"): got %v, %v; want the builtin upstreams", builtin, err)
	}
}
