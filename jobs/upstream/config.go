// Package upstream holds the upstreams file of decision D4, the registry of configured upstreams and
// the adapters that talk to them: the OpenAI-compatible HTTP protocol and the local builtin generators.
package upstream

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Media is the kind of output an upstream produces.
type Media string

// The media kinds of the upstreams file.
const (
	MediaImage Media = "image"
	MediaVideo Media = "video"
	MediaChat  Media = "chat"
)

// Protocol is the way the service talks to an upstream.
type Protocol string

// The protocols of the upstreams file.
const (
	ProtocolOpenAI  Protocol = "openai"
	ProtocolBuiltin Protocol = "builtin"
)

// Capability is an optional feature an upstream declares and a request may need.
type Capability string

// Image capabilities.
const (
	CapReferenceImages Capability = "reference_images"
	CapMask            Capability = "mask"
	CapTransparent     Capability = "transparent"
	CapQuality         Capability = "quality"
	CapLarge           Capability = "large"
)

// Video capabilities.
const (
	CapImages        Capability = "images"
	CapVideos        Capability = "videos"
	CapAudios        Capability = "audios"
	CapGenerateAudio Capability = "generate_audio"
)

// Chat capabilities.
const (
	// CapVision marks a chat upstream that accepts image parts (image reading).
	CapVision Capability = "vision"
)

// Video tier codes of spec section 4.5.
const (
	TierA20Pro  = "vidA-2-0-pro-260801"
	TierA20Fast = "vidA-2-0-fast-260801"
	TierA20Mini = "vidA-2-0-mini-260801"
	TierA25Pro  = "vidA-2-5-pro-260801"
	TierBH3     = "vidB-H3"
)

// TierCodes lists every known video tier code in the order of the spec's tier table.
var TierCodes = []string{TierA20Pro, TierA20Fast, TierA20Mini, TierA25Pro, TierBH3}

// DefaultChatModel is the model value of the chat proxy that means "let routing choose" (spec 4.15).
const DefaultChatModel = "service-auto"

// Default values of optional upstream fields.
const (
	DefaultRating      = 0.5
	DefaultSoftTimeout = 60 * time.Second
)

// capabilityBits numbers every known capability so a set of them fits in a bit mask.
var capabilityBits = map[Capability]uint32{
	CapReferenceImages: 1 << 0,
	CapMask:            1 << 1,
	CapTransparent:     1 << 2,
	CapQuality:         1 << 3,
	CapLarge:           1 << 4,
	CapImages:          1 << 5,
	CapVideos:          1 << 6,
	CapAudios:          1 << 7,
	CapGenerateAudio:   1 << 8,
	CapVision:          1 << 9,
}

// mediaCapabilities lists the capabilities each media kind may declare.
var mediaCapabilities = map[Media][]Capability{
	MediaImage: {CapReferenceImages, CapMask, CapTransparent, CapQuality, CapLarge},
	MediaVideo: {CapImages, CapVideos, CapAudios, CapGenerateAudio},
	MediaChat:  {CapVision},
}

// CapabilityMask returns the bit mask of a list of capabilities; unknown ones are ignored.
func CapabilityMask(caps []Capability) uint32 {
	var m uint32
	for _, c := range caps {
		m |= capabilityBits[c]
	}
	return m
}

// KnownCapability reports whether c is a capability of media m.
func KnownCapability(m Media, c Capability) bool {
	return slices.Contains(mediaCapabilities[m], c)
}

// KnownTier reports whether code is one of the video tier codes.
func KnownTier(code string) bool {
	return slices.Contains(TierCodes, code)
}

// Config is one entry of the upstreams file.
type Config struct {
	Name     string   `yaml:"name"`
	Provider string   `yaml:"provider"`
	Media    Media    `yaml:"media"`
	Family   string   `yaml:"family"`
	Protocol Protocol `yaml:"protocol"`
	BaseURL  string   `yaml:"base_url"`
	APIKey   string   `yaml:"api_key"`
	// SecretKey is the second half of a key pair (kling: the secret key that signs the JWT).
	SecretKey    string        `yaml:"secret_key"`
	Model        string        `yaml:"model"`
	Capabilities []Capability  `yaml:"capabilities"`
	Tiers        []string      `yaml:"tiers"`
	SoftTimeout  time.Duration `yaml:"soft_timeout"`
	CostUSD      float64       `yaml:"cost_usd"`
	Rating       float64       `yaml:"rating"`
	// Latency is an artificial delay of the builtin protocol, for tests and benchmarks.
	Latency time.Duration `yaml:"latency"`
	// MaxConcurrency bounds the calls in flight to this upstream at once, from the provider's quota (0: no
	// bound). Every replica takes its share of it (jobs/routing: slots); calls beyond it wait their turn.
	MaxConcurrency int `yaml:"max_concurrency"`
}

// Has reports whether the upstream declares capability c.
func (c *Config) Has(capability Capability) bool {
	return slices.Contains(c.Capabilities, capability)
}

// Serves reports whether the upstream serves the video tier code.
func (c *Config) Serves(tier string) bool {
	return slices.Contains(c.Tiers, tier)
}

// BuiltinUpstreams returns the default upstreams used when no upstreams file is configured.
func BuiltinUpstreams() []Config {
	builtin := func(name string, media Media, family string, rating, cost float64, caps []Capability, tiers []string) Config {
		return Config{
			Name: name, Provider: "local", Media: media, Family: family, Protocol: ProtocolBuiltin,
			Model: name, Capabilities: caps, Tiers: tiers, SoftTimeout: DefaultSoftTimeout,
			CostUSD: cost, Rating: rating,
		}
	}
	return []Config{
		builtin("img-gen2-a", MediaImage, "gen2", 0.8, 0.04,
			[]Capability{CapReferenceImages, CapTransparent, CapQuality, CapLarge}, nil),
		builtin("img-gen2-b", MediaImage, "gen2", 0.6, 0.03,
			[]Capability{CapReferenceImages, CapQuality}, nil),
		builtin("chat-a", MediaChat, "chat", 0.7, 0.001, []Capability{CapVision}, nil),
		builtin("chat-b", MediaChat, "chat", 0.5, 0.001, []Capability{CapVision}, nil),
		builtin("vid-a-1", MediaVideo, "vidA", 0.7, 0.05,
			[]Capability{CapImages, CapVideos, CapAudios, CapGenerateAudio},
			[]string{TierA20Pro, TierA20Fast, TierA20Mini, TierA25Pro}),
		builtin("vid-a-2", MediaVideo, "vidA", 0.5, 0.05,
			[]Capability{CapImages, CapGenerateAudio},
			[]string{TierA20Pro, TierA20Fast, TierA20Mini, TierA25Pro}),
		builtin("vid-b-1", MediaVideo, "vidB", 0.6, 0.06,
			[]Capability{CapImages, CapVideos, CapAudios, CapGenerateAudio},
			[]string{TierBH3}),
	}
}

// LoadFile reads and validates an upstreams file.
func LoadFile(path string) ([]Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("upstreams: %w", err)
	}
	return Parse(path, data)
}

// Parse validates the YAML text of an upstreams file; name prefixes every error message.
func Parse(name string, data []byte) ([]Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &parser{file: name}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, p.errorf(&doc, "", "the file is empty; it needs an upstreams list")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.errorf(root, "", "must be a mapping with an upstreams key")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		if key.Value != "upstreams" {
			return nil, p.errorf(key, key.Value, "unknown field")
		}
		list = val
	}
	if list == nil {
		return nil, p.errorf(root, "upstreams", "is required")
	}
	if list.Kind != yaml.SequenceNode {
		return nil, p.errorf(list, "upstreams", "must be a list")
	}
	if len(list.Content) == 0 {
		return nil, p.errorf(list, "upstreams", "must list at least one upstream")
	}
	configs := make([]Config, 0, len(list.Content))
	names := map[string]int{}
	for i, item := range list.Content {
		c, err := p.upstream(i, item)
		if err != nil {
			return nil, err
		}
		if first, dup := names[c.Name]; dup {
			return nil, p.errorf(item, fmt.Sprintf("upstreams[%d].name", i),
				"duplicate name %q (also upstreams[%d])", c.Name, first)
		}
		names[c.Name] = i
		configs = append(configs, c)
	}
	return configs, nil
}

// parser turns yaml nodes into configs and keeps the file name for messages.
type parser struct {
	file string
}

// errorf builds an error of the form file:line: field: message.
func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return fmt.Errorf("%s:%d: %s", p.file, n.Line, msg)
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces every ${VAR} with its environment value; an unset variable is an error.
func expand(s string) (string, error) {
	var missing string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := os.LookupEnv(name)
		if !ok && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("environment variable %s is not set", missing)
	}
	return out, nil
}

// upstream decodes and validates the i-th list item.
func (p *parser) upstream(i int, n *yaml.Node) (Config, error) {
	prefix := fmt.Sprintf("upstreams[%d]", i)
	c := Config{SoftTimeout: DefaultSoftTimeout, Rating: DefaultRating}
	if n.Kind != yaml.MappingNode {
		return c, p.errorf(n, prefix, "must be a mapping")
	}
	seen := map[string]*yaml.Node{}
	for j := 0; j+1 < len(n.Content); j += 2 {
		key, val := n.Content[j], n.Content[j+1]
		field := prefix + "." + key.Value
		if _, dup := seen[key.Value]; dup {
			return c, p.errorf(key, field, "given twice")
		}
		seen[key.Value] = key
		if err := p.field(&c, field, key.Value, val); err != nil {
			return c, err
		}
	}
	return c, p.check(&c, prefix, n, seen)
}

// scalar returns the expanded text of a scalar node.
func (p *parser) scalar(field string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.errorf(n, field, "must be a single value")
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	v, err := expand(n.Value)
	if err != nil {
		return "", p.errorf(n, field, "%v", err)
	}
	return strings.TrimSpace(v), nil
}

// strings returns the expanded items of a sequence node.
func (p *parser) strings(field string, n *yaml.Node) ([]string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(n, field, "must be a list")
	}
	out := make([]string, 0, len(n.Content))
	for k, item := range n.Content {
		v, err := p.scalar(fmt.Sprintf("%s[%d]", field, k), item)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// field decodes one key of an upstream entry into c.
func (p *parser) field(c *Config, field, key string, val *yaml.Node) error {
	switch key {
	case "capabilities":
		items, err := p.strings(field, val)
		if err != nil {
			return err
		}
		for _, s := range items {
			c.Capabilities = append(c.Capabilities, Capability(s))
		}
		return nil
	case "tiers":
		items, err := p.strings(field, val)
		c.Tiers = items
		return err
	}
	s, err := p.scalar(field, val)
	if err != nil {
		return err
	}
	switch key {
	case "name":
		c.Name = s
	case "provider":
		c.Provider = s
	case "media":
		c.Media = Media(s)
		if c.Media != MediaImage && c.Media != MediaVideo && c.Media != MediaChat {
			return p.errorf(val, field, "must be image, video or chat")
		}
	case "family":
		c.Family = s
	case "protocol":
		c.Protocol = Protocol(s)
		if !knownProtocol(c.Protocol) {
			return p.errorf(val, field, "must be one of %s", protocolList())
		}
	case "base_url":
		c.BaseURL = strings.TrimRight(s, "/")
		if s != "" {
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return p.errorf(val, field, "must be an http or https URL")
			}
		}
	case "api_key":
		c.APIKey = s
	case "secret_key":
		c.SecretKey = s
	case "model":
		c.Model = s
	case "soft_timeout", "latency":
		d, err := time.ParseDuration(s)
		if err != nil {
			return p.errorf(val, field, "must be a duration such as 60s")
		}
		if key == "soft_timeout" {
			if d <= 0 {
				return p.errorf(val, field, "must be positive")
			}
			c.SoftTimeout = d
		} else {
			if d < 0 {
				return p.errorf(val, field, "must not be negative")
			}
			c.Latency = d
		}
	case "cost_usd":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 {
			return p.errorf(val, field, "must be a number of at least 0")
		}
		c.CostUSD = f
	case "max_concurrency":
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 1_000_000 {
			return p.errorf(val, field, "must be a whole number from 0 (no bound) to 1000000")
		}
		c.MaxConcurrency = n
	case "rating":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f > 1 {
			return p.errorf(val, field, "must be a number from 0 to 1")
		}
		c.Rating = f
	default:
		return p.errorf(val, field, "unknown field")
	}
	return nil
}

// check validates the relations between the fields of one entry.
func (p *parser) check(c *Config, prefix string, n *yaml.Node, seen map[string]*yaml.Node) error {
	at := func(key string) *yaml.Node {
		if k, ok := seen[key]; ok {
			return k
		}
		return n
	}
	for _, key := range []string{"name", "media", "protocol"} {
		if _, ok := seen[key]; !ok {
			return p.errorf(n, prefix+"."+key, "is required")
		}
	}
	if c.Name == "" {
		return p.errorf(at("name"), prefix+".name", "must not be empty")
	}
	if strings.EqualFold(c.Name, "auto") || c.Name == DefaultChatModel || KnownTier(c.Name) {
		return p.errorf(at("name"), prefix+".name", "%q is reserved", c.Name)
	}
	if c.Provider == "" {
		if c.Protocol != ProtocolBuiltin {
			return p.errorf(at("provider"), prefix+".provider", "is required")
		}
		c.Provider = "local"
	}
	if c.Media == MediaImage && c.Family == "" {
		return p.errorf(at("family"), prefix+".family", "is required for image upstreams")
	}
	if c.Protocol == ProtocolOpenAI {
		if c.BaseURL == "" {
			return p.errorf(at("base_url"), prefix+".base_url", "is required for the openai protocol")
		}
		if c.Model == "" && c.Media != MediaVideo {
			return p.errorf(at("model"), prefix+".model", "is required for the openai protocol")
		}
	}
	if key, msg := checkProtocol(c); msg != "" {
		return p.errorf(at(key), prefix+"."+key, "%s", msg)
	}
	if c.Protocol == ProtocolBuiltin && c.SecretKey != "" || c.Protocol == ProtocolOpenAI && c.SecretKey != "" {
		return p.errorf(at("secret_key"), prefix+".secret_key", "is not used by the %s protocol", c.Protocol)
	}
	for k, capability := range c.Capabilities {
		if !KnownCapability(c.Media, capability) {
			allowed := make([]string, 0, 5)
			for _, a := range mediaCapabilities[c.Media] {
				allowed = append(allowed, string(a))
			}
			return p.errorf(at("capabilities"), fmt.Sprintf("%s.capabilities[%d]", prefix, k),
				"unknown capability %q for %s (known: %s)", capability, c.Media, strings.Join(allowed, ", "))
		}
	}
	if c.Media == MediaVideo {
		if len(c.Tiers) == 0 {
			return p.errorf(at("tiers"), prefix+".tiers", "a video upstream must serve at least one tier")
		}
		for k, t := range c.Tiers {
			if !KnownTier(t) {
				return p.errorf(at("tiers"), fmt.Sprintf("%s.tiers[%d]", prefix, k),
					"unknown tier %q (known: %s)", t, strings.Join(TierCodes, ", "))
			}
		}
	} else if len(c.Tiers) > 0 {
		return p.errorf(at("tiers"), prefix+".tiers", "only video upstreams serve tiers")
	}
	return nil
}

// Validate checks a config built in code with the same rules as the upstreams file.
func Validate(cfgs []Config) error {
	names := map[string]bool{}
	for i, c := range cfgs {
		prefix := fmt.Sprintf("upstreams[%d]", i)
		switch {
		case c.Name == "":
			return fmt.Errorf("%s.name: is required", prefix)
		case names[c.Name]:
			return fmt.Errorf("%s.name: duplicate name %q", prefix, c.Name)
		case c.Media != MediaImage && c.Media != MediaVideo && c.Media != MediaChat:
			return fmt.Errorf("%s.media: must be image, video or chat", prefix)
		case !knownProtocol(c.Protocol):
			return fmt.Errorf("%s.protocol: must be one of %s", prefix, protocolList())
		case c.Protocol == ProtocolOpenAI && c.BaseURL == "":
			return fmt.Errorf("%s.base_url: is required for the openai protocol", prefix)
		case c.SoftTimeout <= 0:
			return fmt.Errorf("%s.soft_timeout: must be positive", prefix)
		}
		for _, capability := range c.Capabilities {
			if !KnownCapability(c.Media, capability) {
				return fmt.Errorf("%s.capabilities: unknown capability %q for %s", prefix, capability, c.Media)
			}
		}
		if key, msg := checkProtocol(&c); msg != "" {
			return fmt.Errorf("%s.%s: %s", prefix, key, msg)
		}
		for _, t := range c.Tiers {
			if !KnownTier(t) {
				return fmt.Errorf("%s.tiers: unknown tier %q", prefix, t)
			}
		}
		names[c.Name] = true
	}
	if len(cfgs) == 0 {
		return errors.New("upstreams: no upstream configured")
	}
	return nil
}
