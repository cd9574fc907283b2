package routing

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"studio/jobs/upstream"
	"studio/jobs/upstream/fakeupstream"
)

// channel describes one openai upstream of a test, served by the fake server.
type channel struct {
	name, provider, family string
	media                  upstream.Media
	caps                   []upstream.Capability
	tiers                  []string
}

// fixture is an engine over openai upstreams served by a fake server.
type fixture struct {
	t     *testing.T
	fake  *fakeupstream.Server
	store *MemoryHealthStore
	e     *Engine
}

// newFixture starts a fake server and an engine over the given channels, with short time-outs.
func newFixture(t *testing.T, channels ...channel) *fixture {
	t.Helper()
	fake := fakeupstream.New()
	t.Cleanup(fake.Close)
	var cfgs []upstream.Config
	for _, c := range channels {
		cfgs = append(cfgs, upstream.Config{
			Name: c.name, Provider: c.provider, Family: c.family, Media: c.media, Protocol: upstream.ProtocolOpenAI,
			BaseURL: fake.ChannelURL(c.name), APIKey: "sk-" + c.name, Model: "model-" + c.name,
			Capabilities: c.caps, Tiers: c.tiers, SoftTimeout: 150 * time.Millisecond, Rating: 0.5, CostUSD: 0.04,
		})
	}
	reg, err := upstream.NewRegistry(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	store := NewMemoryHealthStore()
	e := NewEngine(reg, Options{Store: store, Seed: 1, RetryBase: time.Millisecond, RefreshInterval: time.Hour})
	return &fixture{t: t, fake: fake, store: store, e: e}
}

// gen2 returns three image channels of family gen2 from two providers and one of family gen3.
func gen2() []channel {
	caps := []upstream.Capability{upstream.CapReferenceImages, upstream.CapQuality}
	return []channel{
		{name: "img-a", provider: "alpha", family: "gen2", media: upstream.MediaImage, caps: caps},
		{name: "img-b", provider: "beta", family: "gen2", media: upstream.MediaImage, caps: caps},
		{name: "img-c", provider: "alpha", family: "gen2", media: upstream.MediaImage, caps: caps},
		{name: "img-x", provider: "gamma", family: "gen3", media: upstream.MediaImage, caps: caps},
	}
}

// generate is a Run call that asks the upstream for a picture.
func generate(ctx context.Context, u *upstream.Upstream) error {
	_, err := u.Image().GenerateImage(ctx, upstream.ImageRequest{Prompt: "a cat", Ratio: "1:1"})
	return err
}

// attempts returns the recorded attempts of an upstream after flushing, one per call.
func (f *fixture) attempts(name string) []Attempt {
	f.t.Helper()
	if err := f.e.Flush(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	all, _ := f.store.AttemptsSince(context.Background(), time.Now().Add(-time.Hour))
	var out []Attempt
	for _, a := range all {
		if a.Upstream == name {
			for range a.N() { // one per call
				a.Count = 1
				out = append(out, a)
			}
		}
	}
	return out
}

// status returns the admin view of one upstream.
func (f *fixture) status(name string) Status {
	for _, s := range f.e.List() {
		if s.Name == name {
			return s
		}
	}
	f.t.Fatalf("no upstream %s in List", name)
	return Status{}
}

// notes collects progress notes safely.
type notes struct {
	mu  sync.Mutex
	all []string
}

func (n *notes) add(s string) { n.mu.Lock(); n.all = append(n.all, s); n.mu.Unlock() }

// assertSafe fails when a tenant-facing error text names a provider or channel.
func assertSafe(t *testing.T, err error, channels []channel) {
	t.Helper()
	for _, c := range channels {
		for _, secret := range []string{c.name, c.provider, "model-" + c.name} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error text %q names %q", err.Error(), secret)
			}
		}
	}
}

func TestTimingOutPrimaryIsRetriedTwiceThenReplaced(t *testing.T) {
	chans := gen2()
	f := newFixture(t, chans...)
	var primary string
	var n notes
	var mu sync.Mutex
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Model: "gen2"}, n.add, func(ctx context.Context, u *upstream.Upstream) error {
		mu.Lock()
		if primary == "" {
			primary = u.Name
			f.fake.SetChannelFault(u.Name, fakeupstream.Fault{Mode: fakeupstream.Hang})
		}
		mu.Unlock()
		return generate(ctx, u)
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := f.fake.ChannelCount(primary, "/v1/images/generations"); got != 3 {
		t.Errorf("primary got %d requests, want 1 + 2 retries", got)
	}
	if len(n.all) != 1 || n.all[0] != "upstream failed, switching to backup channel (1/2)" {
		t.Errorf("progress notes: got %q", n.all)
	}
	as := f.attempts(primary)
	if len(as) != 3 {
		t.Fatalf("got %d recorded attempts of the primary, want 3", len(as))
	}
	for _, a := range as {
		if a.OK || a.Class != "transient" || a.LatencyMS < 140 {
			t.Errorf("primary attempt %+v, want a transient failure after the soft time-out", a)
		}
	}
	var okBackup int
	for _, c := range chans {
		for _, a := range f.attempts(c.name) {
			if c.name != primary && a.OK {
				okBackup++
				if c.family != "gen2" {
					t.Errorf("image fallback left the family: %s", c.name)
				}
			}
		}
	}
	if okBackup != 1 {
		t.Errorf("got %d successful backup attempts, want 1", okBackup)
	}
	if s := f.status(primary); s.SuccessRate != 0 || s.Attempts != 3 {
		t.Errorf("cached health of the primary: got %+v", s)
	}
}

func TestEveryUpstreamFailingReportsBothSwitches(t *testing.T) {
	chans := gen2()
	f := newFixture(t, chans...)
	f.fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.ServerError})
	var n notes
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Model: "auto"}, n.add, generate)
	var re *RunError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a RunError", err)
	}
	want := []string{"upstream failed, switching to backup channel (1/2)", "upstream failed, switching to backup channel (2/2)"}
	if strings.Join(n.all, "|") != strings.Join(want, "|") {
		t.Errorf("progress notes: got %q, want %q", n.all, want)
	}
	// 500 is not transient: one request per upstream, three upstreams of one family.
	if got := f.fake.Count("/v1/images/generations"); got != 3 || len(re.Attempts) != 3 {
		t.Errorf("got %d requests and %d attempts, want 3", got, len(re.Attempts))
	}
	family := ""
	for _, a := range re.Attempts {
		fam := f.e.Registry().Current().ByName(a.Upstream).Family
		if family != "" && fam != family {
			t.Errorf("chain mixes families %s and %s", family, fam)
		}
		family = fam
		if a.Class != upstream.ClassOther {
			t.Errorf("HTTP 500 classified %q, want other", a.Class)
		}
	}
	if err.Error() != "generation failed on all upstream channels" {
		t.Errorf("got %q", err.Error())
	}
	assertSafe(t, err, chans)
	if !strings.Contains(re.Detail(), re.Attempts[0].Upstream) {
		t.Errorf("Detail %q should name the upstreams for logs", re.Detail())
	}
}

func TestRevokedUpstreamIsRemovedUntilProbeSucceeds(t *testing.T) {
	chans := gen2()
	f := newFixture(t, chans...)
	var primary string
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Model: "gen2"}, nil, func(ctx context.Context, u *upstream.Upstream) error {
		if primary == "" {
			primary = u.Name
			f.fake.SetChannelFault(u.Name, fakeupstream.Fault{Mode: fakeupstream.Unauthorized})
		}
		return generate(ctx, u)
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := f.fake.ChannelCount(primary, "/v1/images/generations"); got != 1 {
		t.Errorf("a 401 was retried: %d requests", got)
	}
	if s := f.status(primary); s.State != StateRemoved || !strings.Contains(s.Reason, "revoked") {
		t.Errorf("after a 401 got state %q reason %q, want removed", s.State, s.Reason)
	}
	if as := f.attempts(primary); len(as) != 1 || as[0].Class != "revoked" {
		t.Errorf("recorded %+v, want one revoked attempt", as)
	}
	states, _ := f.store.States(context.Background())
	if len(states) != 1 || !states[0].Removed || states[0].Upstream != primary {
		t.Errorf("stored states %+v, want the primary removed", states)
	}
	for range 100 {
		chain, err := f.e.Plan(Request{Media: upstream.MediaImage})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range chain {
			if u.Name == primary {
				t.Fatal("a removed upstream was planned")
			}
		}
	}
	if _, err := f.e.Plan(Request{Media: upstream.MediaImage, Model: primary}); !errors.Is(err, ErrNoUpstream) {
		t.Errorf("locking the removed channel: got %v, want ErrNoUpstream", err)
	}

	restored, err := f.e.ProbeRemoved(context.Background())
	if err != nil || restored != 0 || f.status(primary).State != StateRemoved {
		t.Errorf("failing probe: restored %d (%v), state %q", restored, err, f.status(primary).State)
	}
	if got := f.fake.ChannelCount(primary, "/v1/models"); got != 1 {
		t.Errorf("probe sent %d GET /models, want 1", got)
	}
	f.fake.ClearFaults()
	restored, err = f.e.ProbeRemoved(context.Background())
	if err != nil || restored != 1 || f.status(primary).State != StateActive {
		t.Errorf("succeeding probe: restored %d (%v), state %q", restored, err, f.status(primary).State)
	}
	if _, err := f.e.Plan(Request{Media: upstream.MediaImage, Model: primary}); err != nil {
		t.Errorf("restored channel: %v", err)
	}
}

func TestInsufficientQuotaMarksUnpaid(t *testing.T) {
	f := newFixture(t, gen2()...)
	f.fake.SetChannelFault("img-a", fakeupstream.Fault{Mode: fakeupstream.Quota})
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Model: "img-a"}, nil, generate)
	if err == nil {
		t.Fatal("Run succeeded against an unpaid upstream")
	}
	if got := f.fake.ChannelCount("img-a", "/v1/images/generations"); got != 1 {
		t.Errorf("insufficient_quota was retried: %d requests", got)
	}
	s := f.status("img-a")
	if s.State != StateRemoved || !strings.Contains(s.Reason, "unpaid") || !strings.Contains(s.Reason, "429") {
		t.Errorf("got state %q reason %q, want removed as unpaid (429)", s.State, s.Reason)
	}
	if as := f.attempts("img-a"); len(as) != 1 || as[0].Class != "unpaid" {
		t.Errorf("recorded %+v, want one unpaid attempt", as)
	}
}

func TestRateLimitIsRetriedOnTheSameUpstream(t *testing.T) {
	f := newFixture(t, gen2()...)
	f.fake.SetChannelFault("img-b", fakeupstream.Fault{Mode: fakeupstream.RateLimit, Times: 2})
	var n notes
	if err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Model: "img-b"}, n.add, generate); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := f.fake.ChannelCount("img-b", "/v1/images/generations"); got != 3 {
		t.Errorf("got %d requests, want 2 rate-limited and 1 successful", got)
	}
	if len(n.all) != 0 {
		t.Errorf("a retry on the same upstream reported %q", n.all)
	}
	classes := ""
	for _, a := range f.attempts("img-b") {
		classes += a.Class + ","
	}
	if classes != "transient,transient,," {
		t.Errorf("recorded classes %q, want transient, transient, success", classes)
	}
}

func TestChannelLockNeverFallsBack(t *testing.T) {
	chans := gen2()
	f := newFixture(t, chans...)
	for range 50 {
		chain, err := f.e.Plan(Request{Media: upstream.MediaImage, Model: "img-c"})
		if err != nil || len(chain) != 1 || chain[0].Name != "img-c" {
			t.Fatalf("Plan with a channel lock: got %v, %v", names(chain), err)
		}
	}
	f.fake.SetChannelFault("img-c", fakeupstream.Fault{Mode: fakeupstream.ServerError})
	var n notes
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Model: "img-c"}, n.add, generate)
	if err == nil {
		t.Fatal("Run succeeded on a failing locked channel")
	}
	if total := f.fake.Count("/v1/images/generations"); total != 1 {
		t.Errorf("got %d requests in all, want only the locked channel's one", total)
	}
	if len(n.all) != 0 {
		t.Errorf("a locked channel reported switches: %q", n.all)
	}
	assertSafe(t, err, chans)
}

func TestBadJSONIsClassifiedOther(t *testing.T) {
	f := newFixture(t, gen2()...)
	f.fake.SetChannelFault("img-a", fakeupstream.Fault{Mode: fakeupstream.BadJSON})
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Model: "img-a"}, nil, generate)
	var re *RunError
	if !errors.As(err, &re) || re.Class() != upstream.ClassOther {
		t.Fatalf("got %v, want a RunError of class other", err)
	}
	if got := f.fake.ChannelCount("img-a", "/v1/images/generations"); got != 1 {
		t.Errorf("bad JSON was retried: %d requests", got)
	}
	if as := f.attempts("img-a"); len(as) != 1 || as[0].Class != "other" {
		t.Errorf("recorded %+v, want one attempt of class other", as)
	}
	if f.status("img-a").State != StateActive {
		t.Error("bad JSON took the upstream out of rotation")
	}
}

func TestCapabilityFiltering(t *testing.T) {
	f := newFixture(t, gen2()...)
	_, err := f.e.Plan(Request{Media: upstream.MediaImage, Needs: []upstream.Capability{upstream.CapTransparent}})
	if !errors.Is(err, ErrNoUpstream) {
		t.Fatalf("transparent with no capable upstream: got %v, want ErrNoUpstream", err)
	}
	called := false
	err = f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Needs: []upstream.Capability{upstream.CapTransparent}}, nil, func(context.Context, *upstream.Upstream) error {
		called = true
		return nil
	})
	if !errors.Is(err, ErrNoUpstream) || called {
		t.Errorf("Run: got %v (called %v), want ErrNoUpstream without a call", err, called)
	}
	assertSafe(t, err, gen2())

	reg, _ := upstream.LoadRegistry("")
	builtin := NewEngine(reg, Options{Seed: 3})
	for _, need := range []upstream.Capability{upstream.CapMask} {
		if _, err := builtin.Plan(Request{Media: upstream.MediaImage, Needs: []upstream.Capability{need}}); !errors.Is(err, ErrNoUpstream) {
			t.Errorf("builtin upstreams with %s: got %v, want ErrNoUpstream", need, err)
		}
	}
	for range 50 {
		chain, err := builtin.Plan(Request{Media: upstream.MediaImage, Needs: []upstream.Capability{upstream.CapTransparent, upstream.CapReferenceImages}})
		if err != nil || len(chain) != 1 || !chain[0].Has(upstream.CapTransparent) {
			t.Fatalf("transparent on builtin upstreams: got %v, %v; want only the capable one", names(chain), err)
		}
	}
}

func TestBindingRestrictsCandidates(t *testing.T) {
	chans := gen2()
	f := newFixture(t, chans...)
	for range 200 {
		chain, err := f.e.Plan(Request{Media: upstream.MediaImage, Binding: "gen3"})
		if err != nil || len(chain) != 1 || chain[0].Name != "img-x" {
			t.Fatalf("bound to gen3: got %v, %v", names(chain), err)
		}
		chain, err = f.e.Plan(Request{Media: upstream.MediaImage, Model: "auto", Binding: "gen2"})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range chain {
			if u.Family != "gen2" {
				t.Fatalf("bound to gen2, planned %s", u.Name)
			}
		}
		chain, err = f.e.Plan(Request{Media: upstream.MediaImage, Binding: "img-b"})
		if err != nil || len(chain) != 1 || chain[0].Name != "img-b" {
			t.Fatalf("bound to channel img-b: got %v, %v", names(chain), err)
		}
	}
	// Every gen2 upstream fails: a tenant bound to gen2 never reaches gen3.
	f.fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.ServerError})
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Binding: "gen2"}, nil, generate)
	if err == nil {
		t.Fatal("Run succeeded with every upstream failing")
	}
	if got := f.fake.ChannelCount("img-x", "/v1/images/generations"); got != 0 {
		t.Errorf("a tenant bound to gen2 reached gen3 (%d requests)", got)
	}
	assertSafe(t, err, chans)
	if _, err := f.e.Plan(Request{Media: upstream.MediaImage, Model: "gen3", Binding: "gen2"}); !errors.Is(err, ErrNoUpstream) {
		t.Errorf("model outside the binding: got %v, want ErrNoUpstream", err)
	}
	// A binding of another media does not apply.
	if _, err := f.e.Plan(Request{Media: upstream.MediaImage, Binding: "some-chat-family"}); err != nil {
		t.Errorf("binding of no image upstream: got %v", err)
	}
}

func TestUnknownModelAndProvider(t *testing.T) {
	f := newFixture(t, gen2()...)
	for _, req := range []Request{
		{Media: upstream.MediaImage, Model: "gen9"},
		{Media: upstream.MediaImage, Provider: "omega"},
		{Media: upstream.MediaChat, Model: "img-a"},
		{Media: upstream.MediaVideo, Tier: "vidZ"},
	} {
		_, err := f.e.Plan(req)
		if !errors.Is(err, ErrUnknownModel) {
			t.Errorf("%+v: got %v, want ErrUnknownModel", req, err)
		}
	}
}

func TestProviderBypassesScoringAndFallback(t *testing.T) {
	f := newFixture(t, gen2()...)
	seen := map[string]bool{}
	for range 100 {
		chain, err := f.e.Plan(Request{Media: upstream.MediaImage, Provider: "alpha"})
		if err != nil || len(chain) != 1 || chain[0].Provider != "alpha" {
			t.Fatalf("provider alpha: got %v, %v", names(chain), err)
		}
		seen[chain[0].Name] = true
	}
	if !seen["img-a"] || !seen["img-c"] {
		t.Errorf("provider alpha picked only %v, want both of its upstreams", seen)
	}
}

func TestAdminDisableEnable(t *testing.T) {
	f := newFixture(t, gen2()...)
	ctx := context.Background()
	if err := f.e.Disable(ctx, "img-a", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if s := f.status("img-a"); s.State != StateDisabled || s.Reason != "maintenance" || s.Provider != "alpha" || s.Family != "gen2" {
		t.Errorf("after Disable got %+v", s)
	}
	for range 100 {
		chain, _ := f.e.Plan(Request{Media: upstream.MediaImage, Model: "gen2"})
		for _, u := range chain {
			if u.Name == "img-a" {
				t.Fatal("a disabled upstream was planned")
			}
		}
	}
	if err := f.e.Enable(ctx, "img-a"); err != nil {
		t.Fatal(err)
	}
	if s := f.status("img-a"); s.State != StateActive || s.Reason != "" {
		t.Errorf("after Enable got %+v", s)
	}
	if err := f.e.Disable(ctx, "nope", ""); !errors.Is(err, ErrUnknownUpstream) {
		t.Errorf("Disable of an unknown upstream: got %v", err)
	}
	// Another replica sharing the store sees the state after a refresh.
	_ = f.e.Disable(ctx, "img-b", "")
	other := NewEngine(f.e.Registry(), Options{Store: f.store, Seed: 2})
	if s := other.List(); s[1].Name != "img-b" || s[1].State != StateDisabled {
		t.Errorf("other replica: got %+v", s[1])
	}
}

func TestHealthSurvivesRestartAndIsShared(t *testing.T) {
	f := newFixture(t, gen2()...)
	f.fake.SetChannelFault("img-a", fakeupstream.Fault{Mode: fakeupstream.ServerError})
	for range 3 {
		_ = f.e.Run(context.Background(), Request{Media: upstream.MediaImage, Model: "img-a"}, nil, generate)
	}
	_ = f.e.Flush(context.Background())
	restarted := NewEngine(f.e.Registry(), Options{Store: f.store, Seed: 5, RefreshInterval: time.Hour})
	before, after := f.status("img-a"), Status{}
	for _, s := range restarted.List() {
		if s.Name == "img-a" {
			after = s
		}
	}
	if after.Attempts != 3 || after.SuccessRate != 0 || after.Score != before.Score {
		t.Errorf("after a restart got %+v, want the same 3 failed attempts and score %v", after, before.Score)
	}
	// An attempt recorded by another replica reaches this one on the next refresh, once.
	_ = f.store.RecordAttempt(context.Background(), Attempt{Upstream: "img-b", At: time.Now(), OK: true, LatencyMS: 10})
	for range 2 {
		if err := restarted.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range restarted.List() {
		if s.Name == "img-b" && s.Attempts != 1 {
			t.Errorf("img-b: got %d attempts after refreshes, want 1", s.Attempts)
		}
		if s.Name == "img-a" && s.Attempts != 3 {
			t.Errorf("img-a: got %d attempts after refreshes, want still 3", s.Attempts)
		}
	}
}

func TestStreamingChatPassesChunksInOrder(t *testing.T) {
	chans := []channel{
		{name: "chat-a", provider: "alpha", family: "chat", media: upstream.MediaChat},
		{name: "chat-b", provider: "beta", family: "chat", media: upstream.MediaChat},
	}
	f := newFixture(t, chans...)
	f.fake.SetStream(8, 20*time.Millisecond) // 160 ms in all: longer than the 150 ms soft time-out
	body := []byte(`{"model":"service-auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	var got []string
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaChat, Model: "service-auto"}, nil, func(ctx context.Context, u *upstream.Upstream) error {
		resp, err := u.Chat().Relay(ctx, body)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		Commit(ctx) // bytes reach the client from now on
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, `"content":"`); i >= 0 {
				rest := line[i+len(`"content":"`):]
				got = append(got, rest[:strings.Index(rest, `"`)])
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var want []string
	for i := range 8 {
		want = append(want, fmt.Sprintf("chunk-%d ", i))
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got chunks %q, want %q", got, want)
	}
	if f.fake.Count("/v1/chat/completions") != 1 {
		t.Errorf("got %d upstream requests, want 1", f.fake.Count("/v1/chat/completions"))
	}

	// ChatStream through the engine.
	var deltas []string
	err = f.e.Run(context.Background(), Request{Media: upstream.MediaChat}, nil, func(ctx context.Context, u *upstream.Upstream) error {
		Commit(ctx)
		_, err := u.Chat().ChatStream(ctx, upstream.ChatRequest{Messages: []upstream.Message{{Role: "user", Content: "hi"}}}, func(s string) error {
			deltas = append(deltas, s)
			return nil
		})
		return err
	})
	if err != nil || strings.Join(deltas, "|") != strings.Join(want, "|") {
		t.Errorf("ChatStream: got %q, %v", deltas, err)
	}
}

func TestVideoRoutingKeepsTier(t *testing.T) {
	tiersA := []string{upstream.TierA20Fast, upstream.TierA25Pro}
	chans := []channel{
		{name: "vid-1", provider: "alpha", media: upstream.MediaVideo, tiers: tiersA, caps: []upstream.Capability{upstream.CapGenerateAudio}},
		{name: "vid-2", provider: "beta", media: upstream.MediaVideo, tiers: []string{upstream.TierA25Pro}},
		{name: "vid-3", provider: "beta", media: upstream.MediaVideo, tiers: []string{upstream.TierA20Fast}},
		{name: "vid-h", provider: "gamma", media: upstream.MediaVideo, tiers: []string{upstream.TierBH3}},
	}
	f := newFixture(t, chans...)
	for range 100 {
		r, err := f.e.Route(Request{Media: upstream.MediaVideo, Model: upstream.TierA25Pro, Duration: 20})
		if err != nil || r.Tier != upstream.TierA25Pro {
			t.Fatalf("tier model: got %+v, %v", r, err)
		}
		for _, u := range r.Chain {
			if !u.Serves(upstream.TierA25Pro) {
				t.Fatalf("chain %v leaves tier %s", names(r.Chain), r.Tier)
			}
		}
		r, err = f.e.Route(Request{Media: upstream.MediaVideo, Resolution: "2K", Duration: 10})
		if err != nil || r.Tier != upstream.TierBH3 || len(r.Chain) != 1 {
			t.Fatalf("auto tier for 2K: got %+v, %v", r, err)
		}
		r, err = f.e.Route(Request{Media: upstream.MediaVideo, Duration: 10, Resolution: "720p"})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range r.Chain {
			if !u.Serves(r.Tier) {
				t.Fatalf("auto tier %s: chain %v does not keep it", r.Tier, names(r.Chain))
			}
		}
	}
	if _, err := f.e.Plan(Request{Media: upstream.MediaVideo, Model: upstream.TierA20Fast, Duration: 20}); !errors.Is(err, ErrNoUpstream) {
		t.Errorf("duration beyond the tier: got %v, want ErrNoUpstream", err)
	}
	if _, err := f.e.Plan(Request{Media: upstream.MediaVideo, Model: upstream.TierA20Pro}); !errors.Is(err, ErrNoUpstream) {
		t.Errorf("tier nobody serves: got %v, want ErrNoUpstream", err)
	}
	if _, err := f.e.Plan(Request{Media: upstream.MediaVideo, Needs: []upstream.Capability{upstream.CapGenerateAudio}, Resolution: "2K"}); !errors.Is(err, ErrNoUpstream) {
		t.Errorf("generate_audio at 2K: got %v, want ErrNoUpstream", err)
	}

	var tier, id string
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaVideo, Model: "auto", Duration: 20}, nil, func(ctx context.Context, u *upstream.Upstream) error {
		tier = AttemptTier(ctx)
		task, err := u.Video().StartVideo(ctx, upstream.VideoRequest{Prompt: "sea", Tier: tier, Duration: 20, Resolution: "1080p"})
		if err == nil {
			id = task.ID
		}
		return err
	})
	if err != nil || tier != upstream.TierA25Pro || id == "" {
		t.Errorf("Run: tier %q id %q err %v", tier, id, err)
	}
}

func TestAbortAndCancellation(t *testing.T) {
	f := newFixture(t, gen2()...)
	mine := errors.New("reference image unreadable")
	calls := 0
	err := f.e.Run(context.Background(), Request{Media: upstream.MediaImage}, nil, func(context.Context, *upstream.Upstream) error {
		calls++
		return Abort(mine)
	})
	if err != mine || calls != 1 {
		t.Errorf("Abort: got %v after %d calls, want the caller's error after 1", err, calls)
	}
	f.fake.SetFault(fakeupstream.Fault{Mode: fakeupstream.Hang})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = f.e.Run(ctx, Request{Media: upstream.MediaImage}, nil, generate)
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "generation timed out" {
		t.Errorf("caller deadline: got %v", err)
	}
	_ = f.e.Flush(context.Background())
	if all, _ := f.store.AttemptsSince(context.Background(), time.Time{}); len(all) != 0 {
		t.Errorf("recorded %d attempts, want none: neither an abort nor the caller's deadline is the upstream's fault", len(all))
	}
}

func TestBuiltinUpstreamsEndToEnd(t *testing.T) {
	reg, err := upstream.LoadRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(reg, Options{Seed: 9})
	ctx := context.Background()
	var img *upstream.Image
	err = e.Run(ctx, Request{Media: upstream.MediaImage, Needs: []upstream.Capability{upstream.CapTransparent}}, nil, func(ctx context.Context, u *upstream.Upstream) error {
		var err error
		img, err = u.Image().GenerateImage(ctx, upstream.ImageRequest{Prompt: "logo", Background: "transparent"})
		return err
	})
	if err != nil || img.MIME != "image/png" {
		t.Errorf("image: %v", err)
	}
	var text string
	err = e.Run(ctx, Request{Media: upstream.MediaChat, Model: "service-auto"}, nil, func(ctx context.Context, u *upstream.Upstream) error {
		res, err := u.Chat().Chat(ctx, upstream.ChatRequest{Messages: []upstream.Message{{Role: "user", Content: "hello"}}})
		if err == nil {
			text = res.Content
		}
		return err
	})
	if err != nil || text == "" {
		t.Errorf("chat: %q, %v", text, err)
	}
	for _, tier := range upstream.TierCodes {
		err = e.Run(ctx, Request{Media: upstream.MediaVideo, Model: tier}, nil, func(ctx context.Context, u *upstream.Upstream) error {
			task, err := u.Video().StartVideo(ctx, upstream.VideoRequest{Prompt: "x", Tier: AttemptTier(ctx), Duration: 4})
			if err != nil {
				return err
			}
			rc, err := u.Video().VideoContent(ctx, task.ID)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(io.Discard, rc)
			return err
		})
		if err != nil {
			t.Errorf("video tier %s: %v", tier, err)
		}
	}
}
