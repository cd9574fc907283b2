package rest

import (
	"container/list"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"golang.org/x/time/rate"

	"studio/models"
)

// Rate limits of the public claim endpoints, per client address, against guessing codes: a token bucket
// that holds a minute's allowance and refills evenly.
const (
	claimPreviewPerMinute = 30
	claimRedeemPerMinute  = 10
)

// registerClaims adds the routes of claim codes: tenant creation, public preview and redemption, buyer claims.
// The administrator's void is the admin action promo-claim-disable (models.registerClaimAdmin).
func (s *Server) registerClaims(api *mux.Router) {
	now := func() time.Time { return s.svc.Now() } // read at each call: tests move the clock
	preview := newAddrLimiter(claimPreviewPerMinute, time.Minute, now)
	redeem := newAddrLimiter(claimRedeemPerMinute, time.Minute, now)
	api.HandleFunc("/tenant-claims", s.authed(s.idempotent("tenant-claims", s.createClaim, nil))).Methods(http.MethodPost)
	api.HandleFunc("/promo-claims", s.public(preview.limit(s.previewClaim))).Methods(http.MethodGet)
	api.HandleFunc("/promo-claims", s.public(redeem.limit(s.redeemClaim))).Methods(http.MethodPost)
	api.HandleFunc("/claims", s.authed(s.userClaims)).Methods(http.MethodGet)
}

func (s *Server) createClaim(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	var in models.ClaimInput
	if err := decode(r, &in); err != nil {
		return err
	}
	out, err := s.svc.CreateClaimCode(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeOK(w, out)
	return nil
}

func (s *Server) previewClaim(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.PreviewClaim(r.Context(), r.URL.Query().Get("code"))
	if err != nil {
		return err
	}
	writeOK(w, out)
	return nil
}

func (s *Server) redeemClaim(w http.ResponseWriter, r *http.Request) error {
	var in models.RedeemInput
	if err := decode(r, &in); err != nil {
		return err
	}
	out, err := s.svc.RedeemClaim(r.Context(), in)
	if err != nil {
		return err
	}
	writeOK(w, out)
	return nil
}

func (s *Server) userClaims(w http.ResponseWriter, r *http.Request, id *models.Identity) error {
	out, err := s.svc.UserClaims(r.Context(), id)
	if err != nil {
		return err
	}
	writeOK(w, out)
	return nil
}

// addrLimiter limits the calls of each client address with a token bucket of its own. The buckets live
// in this process: with several replicas behind a balancer each replica allows the limit on its own.
// At most addrLimiterSize addresses are tracked; the least recently seen is dropped first, and a bucket
// idle long enough to be full again is dropped as well, since a fresh one behaves the same.
type addrLimiter struct {
	every time.Duration // one token per every
	burst int
	now   func() time.Time

	mu    sync.Mutex
	order *list.List // of *addrBucket, most recently seen first
	byKey map[string]*list.Element
}

type addrBucket struct {
	key  string
	lim  *rate.Limiter
	seen time.Time
}

// addrLimiterSize bounds the memory of one limiter.
const addrLimiterSize = 10_000

// newAddrLimiter allows n calls per period and client address, refilled evenly over the period.
func newAddrLimiter(n int, period time.Duration, now func() time.Time) *addrLimiter {
	return &addrLimiter{every: period / time.Duration(n), burst: n, now: now, order: list.New(), byKey: map[string]*list.Element{}}
}

// limit wraps a public endpoint: over the limit it answers 429 with Retry-After and never calls h.
func (l *addrLimiter) limit(h func(w http.ResponseWriter, r *http.Request) error) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := l.allow(addrKey(r)); err != nil {
			return err
		}
		return h(w, r)
	}
}

// allow takes one token of the address's bucket, or returns KindRateLimited with the wait.
func (l *addrLimiter) allow(key string) error {
	now := l.now()
	l.mu.Lock()
	b := l.bucket(key, now)
	res := b.lim.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	if wait > 0 {
		res.CancelAt(now)
	}
	l.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	return &models.Error{Kind: models.KindRateLimited, RetryAfter: wait,
		Message: fmt.Sprintf("rate limit exceeded: at most %d calls per minute from one address; retry in %d s",
			int(time.Minute/l.every), int((wait+time.Second-1)/time.Second))}
}

// bucket returns the address's bucket, making it most recently seen; the caller holds mu.
func (l *addrLimiter) bucket(key string, now time.Time) *addrBucket {
	if el, ok := l.byKey[key]; ok {
		b := el.Value.(*addrBucket)
		b.seen = now
		l.order.MoveToFront(el)
		return b
	}
	full := l.every * time.Duration(l.burst) // idle this long, a bucket is full again
	for el := l.order.Back(); el != nil && (l.order.Len() >= addrLimiterSize || now.Sub(el.Value.(*addrBucket).seen) > full); el = l.order.Back() {
		l.order.Remove(el)
		delete(l.byKey, el.Value.(*addrBucket).key)
	}
	b := &addrBucket{key: key, lim: rate.NewLimiter(rate.Every(l.every), l.burst), seen: now}
	l.byKey[key] = l.order.PushFront(b)
	return b
}

// addrKey is the bucket key of the caller's address: the connection's peer (RemoteAddr). X-Forwarded-For
// is not trusted, since any client can send it; behind a reverse proxy every caller shares the proxy's
// address. An IPv6 address counts by its /64 prefix, the block one client usually holds.
func addrKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}
