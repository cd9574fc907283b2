package upstream

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the upstreams file parser: it must never panic, and an accepted
// file must validate again.
func FuzzParse(f *testing.F) {
	f.Add([]byte("upstreams:\n  - {name: a, provider: p, media: image, family: gen2, protocol: builtin}\n"))
	f.Add([]byte("upstreams:\n  - name: v\n    provider: p\n    media: video\n    protocol: builtin\n    tiers: [vidB-H3]\n    soft_timeout: 30s\n"))
	f.Add([]byte("upstreams: [{name: c, media: chat, protocol: openai, base_url: 'http://127.0.0.1:1/v1', api_key: '${NOPE}'}]"))
	f.Add([]byte("upstreams:\n  - &a {name: x}\n  - *a\n"))
	f.Add([]byte(":\n\t- ["))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfgs, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := Validate(cfgs); err != nil {
			t.Fatalf("accepted file fails validation: %v", err)
		}
	})
}
