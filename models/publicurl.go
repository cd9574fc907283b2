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
func (a *App) CheckPublicHost(ctx context.Context, host string) error {
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
