package rest_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// nameServer is a DNS server on loopback UDP that answers A queries from a fixed table and NXDOMAIN
// for every other name; resolver returns a Go resolver that asks only it.
type nameServer struct {
	conn  net.PacketConn
	hosts map[string]netip.Addr
}

func startNameServer(t *testing.T, hosts map[string]string) *nameServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ns := &nameServer{conn: conn, hosts: map[string]netip.Addr{}}
	for name, ip := range hosts {
		ns.hosts[strings.ToLower(name)+"."] = netip.MustParseAddr(ip)
	}
	t.Cleanup(func() { conn.Close() })
	go ns.serve()
	return ns
}

func (ns *nameServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := ns.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		hdr, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		ip, known := ns.hosts[strings.ToLower(q.Name.String())]
		rh := dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true, RecursionAvailable: true}
		if !known {
			rh.RCode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(nil, rh)
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if known && q.Type == dnsmessage.TypeA && ip.Is4() {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: ip.As4()})
		}
		out, err := b.Finish()
		if err == nil {
			_, _ = ns.conn.WriteTo(out, from)
		}
	}
}

func (ns *nameServer) resolver() *net.Resolver {
	addr := ns.conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func TestPrivateURLsAreRefusedAtSubmitNamingTheSetting(t *testing.T) {
	e := newEnv(t, withVar("SERVICE_ALLOW_PRIVATE_URLS", "false"))
	ns := startNameServer(t, map[string]string{"hooks.studio-test.example": "127.0.0.1", "office.studio-test.example": "192.168.1.20",
		"public.studio-test.example": "93.184.216.34"})
	e.app.Resolver = ns.resolver()
	_, key := e.tenant("Acme", 50)
	cases := []struct {
		name, path string
		body       map[string]any
		mention    string
	}{
		{"callback to a name of a loopback address", "/api/generate",
			map[string]any{"prompt": "x", "callback_url": "http://hooks.studio-test.example:8080/done"}, "127.0.0.1"},
		{"callback to a name of a private address", "/api/generate",
			map[string]any{"prompt": "x", "callback_url": "https://office.studio-test.example/done"}, "192.168.1.20"},
		{"callback to localhost", "/api/generate", map[string]any{"prompt": "x", "callback_url": "http://localhost:9000/done"}, "localhost"},
		{"callback to a loopback address", "/api/generate", map[string]any{"prompt": "x", "callback_url": "http://127.0.0.1:9000/done"}, "127.0.0.1"},
		{"reference image on a private name", "/api/generate",
			map[string]any{"prompt": "x", "reference_images": []string{"http://hooks.studio-test.example/a.png"}}, "reference_images[0]"},
		{"video image on a private name", "/api/videos",
			map[string]any{"prompt": "x", "model": "vidA-2-0-fast-260801", "duration": 5, "images": []string{"http://office.studio-test.example/a.png"}}, "images[0]"},
		{"picture to read on a private name", "/api/reverse", map[string]any{"image_url": "http://hooks.studio-test.example/a.png"}, "image_url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", c.path, key, c.body).expect(t, 400)
			msg := r.str("error")
			if !strings.Contains(msg, "SERVICE_ALLOW_PRIVATE_URLS") || !strings.Contains(msg, c.mention) {
				t.Fatalf("error = %q, want it to name SERVICE_ALLOW_PRIVATE_URLS and %q", msg, c.mention)
			}
		})
	}
	if got := e.credits(key); got != 50 {
		t.Fatalf("credits = %v after refused submits, want 50 (nothing charged)", got)
	}
	// A name of a public address is accepted; so is an unresolvable one (it is checked again on connect).
	e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "callback_url": "https://public.studio-test.example/done"}).expect(t, 200)
	e.call("POST", "/api/generate", key, map[string]any{"prompt": "x", "callback_url": "https://unknown.studio-test.example/done"}).expect(t, 200)
}
