package upstream

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// readmeUpstreams returns the README's section on the upstreams file.
func readmeUpstreams(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	start := strings.Index(s, "\n## Upstreams: connecting AI providers")
	if start < 0 {
		t.Fatal("README.md has no section \"## Upstreams: connecting AI providers\"")
	}
	s = s[start+1:]
	if end := strings.Index(s, "\n## "); end > 0 {
		s = s[:end]
	}
	return s
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestReadmeUpstreamsExampleLoads parses the README's example with the real loader, so that the
// documentation cannot drift from what the service accepts.
func TestReadmeUpstreamsExampleLoads(t *testing.T) {
	doc := readmeUpstreams(t)
	blocks := yamlBlock.FindAllStringSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("the README's upstreams section has no yaml example")
	}
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("GATEWAY_API_KEY", "sk-from-the-environment")
	cfgs, err := Parse("README.md", []byte(blocks[0][1]))
	if err != nil {
		t.Fatalf("the README's example is rejected: %v", err)
	}
	if err := Validate(cfgs); err != nil {
		t.Fatalf("the README's example does not validate: %v", err)
	}
	openai := map[Media]bool{}
	for _, c := range cfgs {
		if c.Protocol == ProtocolOpenAI {
			if c.APIKey != "sk-from-the-environment" || !strings.HasSuffix(c.BaseURL, "/v1") {
				t.Errorf("%s: api_key %q base_url %q, want the key from the environment and a /v1 base URL", c.Name, c.APIKey, c.BaseURL)
			}
			openai[c.Media] = true
		}
	}
	if !openai[MediaImage] || !openai[MediaChat] || !openai[MediaVideo] {
		t.Errorf("the example connects OpenAI-compatible upstreams for %v, want image, chat and video", openai)
	}
	// The ${VAR} paragraph quotes the loader's own refusal.
	os.Unsetenv("OPENAI_API_KEY")
	if _, err := Parse("upstreams.yaml", []byte(blocks[0][1])); err == nil || !strings.Contains(doc, strings.SplitN(err.Error(), ": ", 2)[1]) {
		t.Errorf("an unset variable is refused with %v, which the README does not quote", err)
	}
}

// TestReadmeUpstreamsNamesEveryKeyCapabilityAndTier fails when the loader learns a key, a capability or
// a tier that the README does not document.
func TestReadmeUpstreamsNamesEveryKeyCapabilityAndTier(t *testing.T) {
	doc := readmeUpstreams(t)
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		if key := typ.Field(i).Tag.Get("yaml"); key != "" && !strings.Contains(doc, "| `"+key+"` |") {
			t.Errorf("the README's key table has no row for %q", key)
		}
	}
	for media, caps := range mediaCapabilities {
		for _, c := range caps {
			if !strings.Contains(doc, "| "+string(media)+" | `"+string(c)+"` |") {
				t.Errorf("the README's capability table has no row for %s %s", media, c)
			}
		}
	}
	for _, tier := range TierCodes {
		if !strings.Contains(doc, "`"+tier+"`") {
			t.Errorf("the README does not name the tier %s", tier)
		}
	}
	for _, c := range BuiltinUpstreams() {
		if !strings.Contains(doc, "`"+c.Name+"`") {
			t.Errorf("the README does not name the built-in upstream %s", c.Name)
		}
	}
}
