package media

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestIsBlockedAddr(t *testing.T) {
	blocked := []string{
		"127.0.0.1", "127.1.2.3", "0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "172.16.0.1",
		"172.31.255.254", "192.168.1.1", "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.254",
		"192.0.0.8", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250",
		"240.0.0.1", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0",
		"::127.0.0.1", "::ffff:0:a00:1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "fec0::1",
		"ff02::1", "ff05::2", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:7f00:1::1",
		"2002:a00:1::1", "2001:db8::1", "2001::1", "100::1", "3fff::1",
	}
	allowed := []string{
		"1.1.1.1", "8.8.8.8", "93.184.215.14", "100.63.255.255", "100.128.0.1", "172.15.255.255",
		"172.32.0.1", "192.169.0.1", "11.0.0.1", "2606:4700:4700::1111", "2a00:1450:4001:81c::200e",
		"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
	}
	for _, s := range blocked {
		if !IsBlockedAddr(netip.MustParseAddr(s)) {
			t.Errorf("IsBlockedAddr(%s) = false, want true", s)
		}
	}
	for _, s := range allowed {
		if IsBlockedAddr(netip.MustParseAddr(s)) {
			t.Errorf("IsBlockedAddr(%s) = true, want false", s)
		}
	}
	if !IsBlockedAddr(netip.Addr{}) {
		t.Errorf("IsBlockedAddr(zero) = false, want true")
	}
}

func TestDialGuardControl(t *testing.T) {
	tests := []struct {
		network, address string
		ok               bool
	}{
		{"tcp4", "127.0.0.1:80", false},
		{"tcp6", "[::1]:443", false},
		{"tcp4", "10.1.2.3:8080", false},
		{"tcp4", "169.254.169.254:80", false},
		{"tcp6", "[::ffff:127.0.0.1]:80", false},
		{"tcp6", "[::ffff:169.254.169.254]:80", false},
		{"tcp6", "[fd00::1]:80", false},
		{"tcp4", "100.64.1.1:80", false},
		{"tcp4", "not-an-address", false},
		{"udp4", "8.8.8.8:53", false},
		{"tcp4", "8.8.8.8:443", true},
		{"tcp6", "[2606:4700:4700::1111]:443", true},
	}
	guard := dialGuard{}
	for _, tt := range tests {
		err := guard.control(tt.network, tt.address, nil)
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBlockedAddress)) {
			t.Errorf("control(%s, %s) = %v, want ok=%v", tt.network, tt.address, err, tt.ok)
		}
	}
	open := dialGuard{allowPrivate: true}
	if err := open.control("tcp4", "127.0.0.1:80", nil); err != nil {
		t.Errorf("allowPrivate control(127.0.0.1) = %v, want nil", err)
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://example.com/a.png", true},
		{"http://example.com:8080/a.png?x=1", true},
		{"HTTPS://EXAMPLE.COM/a.png", true},
		{"http://[2606:4700::1]/x", true},
		{"ftp://example.com/a.png", false},
		{"file:///etc/passwd", false},
		{"gopher://example.com/", false},
		{"javascript:alert(1)", false},
		{"data:image/png;base64,AAAA", false},
		{"//example.com/a.png", false},
		{"/relative/a.png", false},
		{"http://", false},
		{"http://user:pass@example.com/", false},
		{"http://example.com:99999/", false},
		{"http://example.com:0/", false},
		{"", false},
		{"http://exa mple.com/", false},
		{"https://example.com/" + strings.Repeat("a", 5000), false},
	}
	for _, tt := range tests {
		err := CheckURL(tt.url)
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidURL)) {
			t.Errorf("CheckURL(%.60q) = %v, want ok=%v", tt.url, err, tt.ok)
		}
	}
}

func TestFetchAllowPrivate(t *testing.T) {
	png := SamplePNG()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a.png":
			w.Header().Set("Content-Type", "text/plain") // the declared type is ignored
			w.Write(png)
		case "/chunked":
			w.(http.Flusher).Flush() // no Content-Length
			w.Write(png)
		case "/redirect":
			http.Redirect(w, r, "/a.png", http.StatusFound)
		case "/loop":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			http.Redirect(w, r, fmt.Sprintf("/loop?n=%d", n+1), http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/slow":
			time.Sleep(300 * time.Millisecond)
			w.Write(png)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	client := NewSafeClient(true, WithTimeout(5*time.Second))

	for _, path := range []string{"/a.png", "/chunked", "/redirect"} {
		data, mime, err := Fetch(ctx, client, srv.URL+path, int64(len(png)))
		if err != nil || mime != "image/png" || len(data) != len(png) {
			t.Errorf("Fetch(%s) = %d bytes, %q, %v; want %d bytes image/png", path, len(data), mime, err, len(png))
		}
	}
	for _, path := range []string{"/a.png", "/chunked"} {
		if _, _, err := Fetch(ctx, client, srv.URL+path, int64(len(png))-1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Fetch(%s, max-1) = %v, want ErrTooLarge", path, err)
		}
	}
	if _, _, err := Fetch(ctx, client, srv.URL+"/missing", 1000); !errors.Is(err, ErrFetchStatus) {
		t.Errorf("Fetch(404) = %v, want ErrFetchStatus", err)
	}
	if _, _, err := Fetch(ctx, client, srv.URL+"/loop?n=0", 1000); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Errorf("Fetch(redirect loop) = %v, want a redirect limit error", err)
	}
	if _, _, err := Fetch(ctx, client, srv.URL+"/to-file", 1000); !errors.Is(err, ErrInvalidURL) {
		t.Errorf("Fetch(redirect to file:) = %v, want ErrInvalidURL", err)
	}
	if _, _, err := Fetch(ctx, client, "ftp://127.0.0.1/x", 1000); !errors.Is(err, ErrInvalidURL) {
		t.Errorf("Fetch(ftp) = %v, want ErrInvalidURL", err)
	}
	short := NewSafeClient(true, WithTimeout(50*time.Millisecond))
	if _, _, err := Fetch(ctx, short, srv.URL+"/slow", 1000000); err == nil {
		t.Errorf("Fetch(slow) succeeded, want a time-out")
	}
}

func TestFetchRefusesPrivate(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write(SamplePNG())
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	ctx := context.Background()
	client := NewSafeClient(false, WithTimeout(5*time.Second))
	urls := []string{
		srv.URL + "/a.png",
		fmt.Sprintf("http://localhost:%d/a.png", port),
		fmt.Sprintf("http://[::1]:%d/a.png", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/a.png", port),
		fmt.Sprintf("http://0.0.0.0:%d/a.png", port),
	}
	for _, u := range urls {
		if _, _, err := Fetch(ctx, client, u, 1<<20); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("Fetch(%s) = %v, want ErrBlockedAddress", u, err)
		}
	}
	if _, _, err := Fetch(ctx, nil, srv.URL+"/a.png", 1<<20); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("Fetch(nil client) = %v, want ErrBlockedAddress", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times, want 0", n)
	}
}

func TestFetchRedirectToPrivateIsRefused(t *testing.T) {
	// The "public" server is the one loopback address the test guard lets through;
	// it redirects to other loopback addresses, which stand for the private side.
	var target string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			w.Write(SamplePNG())
			return
		}
		http.Redirect(w, r, target, http.StatusFound)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	public := netip.MustParseAddrPort(u.Host).Addr()
	port := u.Port()
	client := newSafeClient(clientConfig{
		timeout: 5 * time.Second,
		guard:   dialGuard{allow: func(a netip.Addr) bool { return a == public }},
	})
	ctx := context.Background()
	if _, _, err := Fetch(ctx, client, srv.URL+"/ok", 1<<20); err != nil {
		t.Fatalf("Fetch(allowed server) = %v", err)
	}
	for _, to := range []string{
		"http://127.0.0.2:" + port + "/ok",
		"http://[::1]:" + port + "/ok",
		"http://[::ffff:127.0.0.3]:" + port + "/ok",
	} {
		target = to
		if _, _, err := Fetch(ctx, client, srv.URL+"/redirect", 1<<20); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("redirect to %s: Fetch = %v, want ErrBlockedAddress", to, err)
		}
	}
}
