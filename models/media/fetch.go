package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults of NewSafeClient and Fetch.
const (
	DefaultFetchTimeout = 60 * time.Second
	MaxRedirects        = 3
	maxURLLen           = 4096
)

// blockedPrefixes are the ranges a safe client never connects to unless private addresses are allowed.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("10.0.0.0/8"),      // private
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local, cloud metadata
	netip.MustParsePrefix("172.16.0.0/12"),   // private
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("192.168.0.0/16"),  // private
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("::/96"),           // unspecified, loopback, IPv4-compatible
	netip.MustParsePrefix("::ffff:0:0/96"),   // IPv4-mapped (unmapped before the check)
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use IPv4/IPv6 translation
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments, Teredo
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("3fff::/20"),       // documentation
	netip.MustParsePrefix("5f00::/16"),       // segment routing
	netip.MustParsePrefix("fc00::/7"),        // unique local
	netip.MustParsePrefix("fe80::/10"),       // link-local
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
	netip.MustParsePrefix("ff00::/8"),        // multicast
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// IsBlockedAddr reports whether a safe client refuses to connect to addr when private addresses are not allowed:
// loopback, private, link-local, CGNAT, unique-local, multicast, unspecified, documentation and other
// special ranges, also when embedded in IPv4-mapped, NAT64 or 6to4 IPv6 addresses.
func IsBlockedAddr(addr netip.Addr) bool {
	if !addr.IsValid() {
		return true
	}
	addr = addr.WithZone("").Unmap()
	if addr.Is6() {
		b := addr.As16()
		switch {
		case nat64Prefix.Contains(addr):
			return IsBlockedAddr(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(addr):
			return IsBlockedAddr(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	if !addr.IsGlobalUnicast() || addr.IsPrivate() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// dialGuard checks each resolved address just before connecting, so DNS answers cannot smuggle in a private one.
type dialGuard struct {
	allowPrivate bool
	// allow, in tests only, lets through particular addresses that are otherwise blocked.
	allow func(netip.Addr) bool
}

func (g dialGuard) control(network, address string, _ syscall.RawConn) error {
	if g.allowPrivate {
		return nil
	}
	if network != "tcp4" && network != "tcp6" && network != "tcp" {
		return fmt.Errorf("%w: network %s", ErrBlockedAddress, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, address)
	}
	if IsBlockedAddr(ap.Addr()) && (g.allow == nil || !g.allow(ap.Addr())) {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, ap.Addr())
	}
	return nil
}

// ClientOption changes a setting of NewSafeClient.
type ClientOption func(*clientConfig)

type clientConfig struct {
	timeout time.Duration
	guard   dialGuard
}

// WithTimeout sets the whole-request time-out of the client (default DefaultFetchTimeout; 0 means none).
func WithTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.timeout = d }
}

// NewSafeClient returns an HTTP client for user-supplied URLs: unless allowPrivate, it refuses to connect to
// any address IsBlockedAddr reports, checked on the resolved IP at connect time; it ignores proxy settings,
// speaks only http and https, and follows at most MaxRedirects redirects.
func NewSafeClient(allowPrivate bool, opts ...ClientOption) *http.Client {
	cfg := clientConfig{timeout: DefaultFetchTimeout, guard: dialGuard{allowPrivate: allowPrivate}}
	for _, o := range opts {
		o(&cfg)
	}
	return newSafeClient(cfg)
}

func newSafeClient(cfg clientConfig) *http.Client {
	dialer := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control:   cfg.guard.control,
	}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would be dialled instead of the target and defeat the guard
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          50,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   cfg.timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("media: stopped after %d redirects", MaxRedirects)
			}
			return checkURL(req.URL)
		},
	}
}

// CheckURL reports whether raw is an absolute http or https URL with a host and no user info;
// whether its address is allowed is decided when connecting.
func CheckURL(raw string) error {
	if raw == "" || len(raw) > maxURLLen {
		return fmt.Errorf("%w: empty or longer than %d bytes", ErrInvalidURL, maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	return checkURL(u)
}

func checkURL(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return fmt.Errorf("%w: scheme %q not allowed", ErrInvalidURL, u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	if u.User != nil {
		return fmt.Errorf("%w: user info not allowed", ErrInvalidURL)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: port %q", ErrInvalidURL, p)
		}
	}
	return nil
}

// Fetch downloads rawURL with client (nil means a safe client without private addresses), failing with
// ErrTooLarge past maxBytes and ErrFetchStatus on a non-2xx answer; it returns the body and the MIME type
// decided from its bytes.
func Fetch(ctx context.Context, client *http.Client, rawURL string, maxBytes int64) ([]byte, string, error) {
	if err := CheckURL(rawURL); err != nil {
		return nil, "", err
	}
	if maxBytes <= 0 {
		return nil, "", errors.New("media: fetch: maxBytes must be positive")
	}
	if client == nil {
		client = defaultClient
	}
	if _, ok := ctx.Deadline(); !ok && client.Timeout == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultFetchTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	req.Header.Set("User-Agent", "studio-media-fetch/1")
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("media: fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, "", fmt.Errorf("%w: %s", ErrFetchStatus, resp.Status)
	}
	if resp.ContentLength > maxBytes {
		return nil, "", fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, resp.ContentLength, maxBytes)
	}
	var data []byte
	if resp.ContentLength >= 0 {
		// net/http ends the body at the declared length, so one exact allocation is enough.
		data = make([]byte, resp.ContentLength)
		_, err = io.ReadFull(resp.Body, data)
	} else {
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	}
	if err != nil {
		return nil, "", fmt.Errorf("media: fetch: %w", err)
	}
	if int64(len(data)) > maxBytes {
		return nil, "", fmt.Errorf("%w: limit %d bytes", ErrTooLarge, maxBytes)
	}
	return data, sniffMIME(data), nil
}

var defaultClient = NewSafeClient(false)
