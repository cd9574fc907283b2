package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"studio/jobs/upstream"
	arkfake "studio/jobs/upstream/ark/fake"
)

// TestUpstreamTestChecksKeyAndReachabilityWithoutGenerating runs `studio admin upstream-test` against
// the Ark fake: a good key answers ok, a revoked one fails naming its class, and nothing is generated.
func TestUpstreamTestChecksKeyAndReachabilityWithoutGenerating(t *testing.T) {
	f := arkfake.New()
	defer f.Close()
	file := filepath.Join(t.TempDir(), "upstreams.yaml")
	yaml := "upstreams:\n" +
		"  - {name: seedance, provider: volcengine, media: video, protocol: ark, base_url: " + f.URL + ", api_key: " + arkfake.Key + ", model: doubao-seedance-1-5-pro-251215, tiers: [vidA-2-0-fast-260801]}\n" +
		"  - {name: seedance-old, provider: volcengine, media: video, protocol: ark, base_url: " + f.URL + ", api_key: " + arkfake.RevokedKey + ", model: m, tiers: [vidA-2-0-fast-260801]}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgs, err := upstream.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := upstreamTest(context.Background(), &out, cfgs, "seedance", 5*time.Second); err != nil {
		t.Fatalf("upstream-test seedance: %v\n%s", err, out.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got["ok"] != true || got["protocol"] != "ark" {
		t.Fatalf("answer %s (%v)", out.String(), err)
	}
	out.Reset()
	err = upstreamTest(context.Background(), &out, cfgs, "seedance-old", 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "revoked") || !strings.Contains(out.String(), `"class": "revoked"`) {
		t.Fatalf("a revoked key: %v\n%s", err, out.String())
	}
	if err := upstreamTest(context.Background(), &out, cfgs, "nope", time.Second); err == nil || !strings.Contains(err.Error(), "seedance, seedance-old") {
		t.Fatalf("an unknown name: %v", err)
	}
	if n := len(f.Requests(http.MethodPost, "")); n != 0 {
		t.Fatalf("%d POST requests: the check generated something", n)
	}
	if n := len(f.Requests(http.MethodGet, "/contents/generations/tasks?")); n != 2 {
		t.Fatalf("%d probes, want 2", n)
	}
}
