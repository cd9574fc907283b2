package models

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"studio/models/media"
)

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// PrivateURLHint names the setting that lets callbacks and fetched URLs reach private addresses.
const PrivateURLHint = "set SERVICE_ALLOW_PRIVATE_URLS=true (--allow-private-urls) to allow loopback and private addresses"

// hostLookupTimeout bounds the name lookup of a submitted URL's host.
const hostLookupTimeout = 3 * time.Second

// CheckPublicHost is the one rule for the hosts of URLs the service calls (callbacks) or fetches
// (reference images, videos, audios, pictures to read): unless SERVICE_ALLOW_PRIVATE_URLS is set, a
// local name (localhost, *.local, *.internal), a loopback, private or other special address, or a name
// that resolves to one is refused, with the setting that allows it. A name that cannot be resolved now
// passes: the safe HTTP client checks every address again when it connects.
//
// A host that is an IPv4 address written in another form than the dotted quad (2130706433, 127.1,
// 0x7f.1, 0177.0.0.1: checkNumericHost) is refused whatever the setting: resolvers and HTTP clients
// disagree on what it means, so it could not be checked here and would not be reached as written.
func (a *App) CheckPublicHost(ctx context.Context, host string) error {
	if err := checkNumericHost(host); err != nil {
		return err
	}
	if a.Config.AllowPrivateURLs {
		return nil
	}
	h := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || strings.HasSuffix(h, ".local") || strings.HasSuffix(h, ".internal") {
		return fmt.Errorf("points at the local name %s, which is not allowed: %s", host, PrivateURLHint)
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if media.IsBlockedAddr(ip) {
			return fmt.Errorf("points at %s, a loopback or private address, which is not allowed: %s", ip, PrivateURLHint)
		}
		return nil
	}
	resolver := a.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	lctx, cancel := context.WithTimeout(ctx, hostLookupTimeout)
	defer cancel()
	addrs, err := resolver.LookupNetIP(lctx, "ip", h)
	if err != nil {
		return nil
	}
	for _, ip := range addrs {
		if media.IsBlockedAddr(ip) {
			return fmt.Errorf("points at %s, which resolves to %s, a loopback or private address, which is not allowed: %s", host, ip.Unmap(), PrivateURLHint)
		}
	}
	return nil
}

// checkNumericHost refuses a host whose last label is a number (decimal digits, or 0x and hex digits, as
// the WHATWG URL standard reads an IPv4 host) unless the whole host is a canonical dotted quad: four
// decimal parts of 0 to 255 without leading zeros. Browsers and many clients read 2130706433, 127.1,
// 0x7f.1 or 0177.0.0.1 as 127.0.0.1, Go's resolver as a name to look up: either way the address the
// private-address check saw is not the one that would be called. IPv6 literals are left to that check.
func checkNumericHost(host string) error {
	if strings.Contains(host, ":") {
		return nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	labels := strings.Split(h, ".")
	if !numericLabel(labels[len(labels)-1]) {
		return nil
	}
	if ip, err := netip.ParseAddr(h); err == nil && ip.Is4() {
		return nil
	}
	return fmt.Errorf("has the host %s, a numeric address not written as a dotted quad (a single number, fewer than four parts, "+
		"or hex, octal or out-of-range parts), which is not allowed: write an IPv4 address as four decimal numbers such as 93.184.216.34, or use a host name", host)
}

// numericLabel reports whether a host label is a number as the WHATWG URL standard reads one: decimal
// digits, or 0x followed by hex digits (none at all included).
func numericLabel(s string) bool {
	digits := "0123456789"
	if strings.HasPrefix(s, "0x") {
		s, digits = s[2:], "0123456789abcdef"
		if s == "" {
			return true
		}
	}
	if s == "" {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune(digits, c) {
			return false
		}
	}
	return true
}
