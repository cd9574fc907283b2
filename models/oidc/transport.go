package oidc

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// limitBody bounds the body of every answer of the provider to MaxBody: reading past it fails.
type limitBody struct{ base http.RoundTripper }

func (l limitBody) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := l.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = &limitedBody{ReadCloser: res.Body, left: MaxBody}
	return res, nil
}

// errTooLarge is the read error past MaxBody.
var errTooLarge = fmt.Errorf("oidc: the provider's answer exceeds %d bytes", MaxBody)

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells an answer of exactly MaxBody bytes from a longer one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// errRefetchTooSoon refuses a key set fetch within KeyRefetchInterval of the last one that succeeded.
var errRefetchTooSoon = fmt.Errorf("oidc: the key set was fetched less than %s ago", KeyRefetchInterval)

// refetchLimit is the transport of the key set: go-oidc's RemoteKeySet fetches the set again whenever a
// token's key is not among the cached ones (one fetch at a time, shared by the tokens that wait for it;
// tokens whose key is cached do not wait). refetchLimit lets such a fetch reach the provider at most
// every `every` after a successful one, so that tokens with unknown keys or bad signatures do not make
// a request each. No lock is held during a request.
type refetchLimit struct {
	base  http.RoundTripper
	now   func() time.Time
	every time.Duration

	mu   sync.Mutex
	last time.Time // of the last fetch answered 200
}

func (l *refetchLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	last := l.last
	l.mu.Unlock()
	if !last.IsZero() && l.now().Sub(last) < l.every {
		return nil, errRefetchTooSoon
	}
	res, err := l.base.RoundTrip(req)
	if err == nil && res.StatusCode == http.StatusOK {
		l.mu.Lock()
		l.last = l.now()
		l.mu.Unlock()
	}
	return res, err
}
