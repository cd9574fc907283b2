package graph

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"
)

// writeTimeout bounds one WebSocket write, so that a client that stopped reading cannot hold a connection's
// writer (and the subscriptions behind it) forever.
const writeTimeout = 10 * time.Second

// writeBuffers are shared by every connection: a buffer is held only while a message is written.
var writeBuffers sync.Pool

// gorillaWebsocket adapts github.com/gorilla/websocket to gqlgen's WebSocket transport.
type gorillaWebsocket struct {
	// initTimeout is how long a new connection may take to send connection_init.
	initTimeout time.Duration
	// pinger keeps the connections alive and finds the dead ones.
	pinger *pinger
}

var _ transport.WebsocketImplementation = gorillaWebsocket{}

// Accept upgrades the request, offering the GraphQL subprotocols (graphql-transport-ws, graphql-ws).
// Any origin is accepted: the credential travels in connection_init or in explicit headers, never in a
// cookie, so another site's page cannot borrow a visitor's authority.
func (g gorillaWebsocket) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	up := websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		// A small read buffer of its own, rather than net/http's 4 KB one, which would keep the whole
		// HTTP connection state (and its 4 KB write buffer) reachable; messages may still be larger.
		ReadBufferSize:  512,
		WriteBufferPool: &writeBuffers,
		Subprotocols:    slices.Clone(opts.Subprotocols),
		CheckOrigin:     func(*http.Request) bool { return true },
		// gqlgen answers a failed upgrade itself.
		Error: func(http.ResponseWriter, *http.Request, int, error) {},
	}
	conn, err := up.Upgrade(hijacker(w), r, opts.ResponseHeader)
	if err != nil {
		return nil, err
	}
	c := &gorillaConn{conn: conn, transportWS: conn.Subprotocol() == subprotocolTransportWS, pinger: g.pinger}
	if g.initTimeout > 0 {
		_ = conn.SetReadDeadline(time.Now().Add(g.initTimeout))
	}
	if h, ok := r.Context().Value(connHolderKey{}).(*connHolder); ok {
		h.conn = c
		close(h.accepted)
	}
	return c, nil
}

// hijacker unwraps middleware response writers (access logs) down to one that can be hijacked.
func hijacker(w http.ResponseWriter) http.ResponseWriter {
	for {
		if _, ok := w.(http.Hijacker); ok {
			return w
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// connHolder tells serveWebsocket when gqlgen took the connection over, and which it is.
type connHolder struct {
	conn     *gorillaConn
	accepted chan struct{}
}

type connHolderKey struct{}

// serveWebsocket runs an upgrade request through next on a goroutine of its own. The HTTP handler
// returns as soon as the connection is upgraded, so that net/http's per-request state and the deep stack
// of the handler chain are not kept for the whole life of a long-lived connection (about half of what
// an idle subscription connection costs). The connection is closed when gqlgen is done with it.
func serveWebsocket(next http.Handler, w http.ResponseWriter, r *http.Request) {
	h := &connHolder{accepted: make(chan struct{})}
	dw := &detachableWriter{ResponseWriter: w}
	// The request's context ends when the handler returns; the connection outlives it. gqlgen keeps the
	// request's headers for the connection's life: only the handshake's are passed on (the credential was
	// read from them already).
	r = r.WithContext(context.WithValue(context.WithoutCancel(r.Context()), connHolderKey{}, h))
	r.Header = handshakeHeaders(r.Header)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer func() {
			if p := recover(); p != nil {
				slog.Error("graphql: panic in WebSocket connection", "panic", p, "stack", string(debug.Stack()))
			}
			if h.conn != nil {
				_ = h.conn.Close()
			}
		}()
		next.ServeHTTP(dw, r)
	}()
	select {
	case <-h.accepted: // hijacked: nothing more is written through w, and net/http's state can go
		dw.ResponseWriter = nil
	case <-finished: // refused before the upgrade: the answer was written through w
	}
}

// handshakeHeaders returns the headers of an upgrade request that the WebSocket handshake reads.
func handshakeHeaders(h http.Header) http.Header {
	out := make(http.Header, 6)
	for _, k := range []string{"Connection", "Upgrade", "Sec-Websocket-Key", "Sec-Websocket-Version",
		"Sec-Websocket-Protocol", "Sec-Websocket-Extensions"} {
		if v, ok := h[k]; ok {
			out[k] = v
		}
	}
	return out
}

// detachableWriter is the response writer gqlgen gets for an upgrade request: once the connection is
// hijacked it forgets net/http's writer (and with it the request's buffers), which gqlgen would otherwise
// keep reachable for the connection's whole life.
type detachableWriter struct{ http.ResponseWriter }

// Hijack takes the connection over from net/http.
func (w *detachableWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := hijacker(w.ResponseWriter).(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("graphql: the response writer cannot be hijacked")
	}
	return h.Hijack()
}

// subprotocolTransportWS is the current GraphQL over WebSocket protocol; the other one is the legacy graphql-ws.
const subprotocolTransportWS = "graphql-transport-ws"

// Close codes of graphql-transport-ws that gqlgen itself does not send.
const (
	closeInitTimeout  = 4408
	closeTooManyInits = 4429
)

// gorillaConn is one accepted connection; gqlgen serialises its writes and its reads.
//
// It also enforces what graphql-transport-ws asks of the server before gqlgen sees a message: a
// subscribe before connection_init closes with 4401, a second connection_init with 4429, and no
// connection_init within the init timeout with 4408 (for both protocols).
type gorillaConn struct {
	conn        *websocket.Conn
	transportWS bool
	wmu         sync.Mutex // gqlgen's messages and the pinger's keep-alive messages
	inits       int        // connection_init messages received
	pinger      *pinger
	closeOnce   sync.Once
}

var (
	_ transport.WebsocketConn          = (*gorillaConn)(nil)
	_ transport.WebsocketReadLimiter   = (*gorillaConn)(nil)
	_ transport.WebsocketReadDeadliner = (*gorillaConn)(nil)
)

// errRefused ends the read loop of a connection this adapter closed.
var errRefused = errors.New("websocket: connection refused by the protocol rules")

// Close closes the connection without a close frame; it may be called more than once.
func (c *gorillaConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.pinger.remove(c)
		err = c.conn.Close()
	})
	return err
}

// NextReader returns the next message; a normal close by the peer is transport.ErrWebsocketClosed.
func (c *gorillaConn) NextReader() (int, io.Reader, error) {
	mt, r, err := c.conn.NextReader()
	if err != nil {
		var ne net.Error
		if c.inits == 0 && errors.As(err, &ne) && ne.Timeout() {
			_ = c.WriteClose(closeInitTimeout, "Connection initialisation timeout")
			return mt, nil, errRefused
		}
		if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseNoStatusReceived) {
			return mt, nil, transport.ErrWebsocketClosed
		}
		return mt, nil, err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return mt, nil, err
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &head)
	switch {
	case head.Type == "connection_init":
		c.inits++
		if c.inits == 1 {
			c.pinger.add(c) // from now on the peer must answer pings
		} else if c.transportWS {
			_ = c.WriteClose(closeTooManyInits, "Too many initialisation requests")
			return mt, nil, errRefused
		}
	case c.inits == 0 && c.transportWS && head.Type == "subscribe":
		_ = c.WriteClose(closeUnauthorized, "Unauthorized")
		return mt, nil, errRefused
	}
	return mt, bytes.NewReader(data), nil
}

// WriteJSON writes one JSON message.
func (c *gorillaConn) WriteJSON(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	return c.conn.WriteJSON(v)
}

// keepAliveMessage is the keep-alive message of the legacy graphql-ws protocol.
var keepAliveMessage = []byte(`{"type":"ka"}`)

// keepAlive pings the peer, and sends a legacy graphql-ws connection its "ka" message unless a message
// is being written right now (which shows the connection alive anyway). A peer that cannot take these few
// bytes within a second is not reading: the failed write ends the connection.
func (c *gorillaConn) keepAlive() {
	deadline := time.Now().Add(time.Second)
	_ = c.conn.WriteControl(websocket.PingMessage, nil, deadline)
	if c.transportWS || !c.wmu.TryLock() {
		return
	}
	defer c.wmu.Unlock()
	if c.conn.SetWriteDeadline(deadline) == nil {
		_ = c.conn.WriteMessage(websocket.TextMessage, keepAliveMessage)
	}
}

// WriteClose sends a close frame with a code and a reason.
func (c *gorillaConn) WriteClose(code int, reason string) error {
	err := c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	if errors.Is(err, websocket.ErrCloseSent) {
		return nil
	}
	return err
}

// Subprotocol is the negotiated subprotocol.
func (c *gorillaConn) Subprotocol() string { return c.conn.Subprotocol() }

// SetReadLimit bounds the size of a message read from the client.
func (c *gorillaConn) SetReadLimit(limit int64) { c.conn.SetReadLimit(limit) }

// SetReadDeadline sets the deadline of the next read.
func (c *gorillaConn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// pinger keeps every initialised connection alive from one goroutine for all of them (gqlgen would run a
// goroutine and a timer per connection): each interval it sends a WebSocket ping frame, and to legacy
// graphql-ws connections their "ka" message. Every WebSocket client answers a ping with a pong (RFC 6455;
// browsers do it themselves); a connection whose pong has not come back within two intervals reaches its
// read deadline and is closed, which ends its subscriptions.
type pinger struct {
	interval time.Duration

	mu      sync.Mutex
	conns   map[*gorillaConn]struct{}
	running bool
}

func newPinger(interval time.Duration) *pinger {
	return &pinger{interval: interval, conns: map[*gorillaConn]struct{}{}}
}

// add starts keeping c alive.
func (p *pinger) add(c *gorillaConn) {
	if p == nil {
		return
	}
	alive := func() error { return c.conn.SetReadDeadline(time.Now().Add(2*p.interval + time.Second)) }
	_ = alive()
	c.conn.SetPongHandler(func(string) error { return alive() })
	p.mu.Lock()
	p.conns[c] = struct{}{}
	if !p.running {
		p.running = true
		go p.loop()
	}
	p.mu.Unlock()
}

// remove stops keeping c alive.
func (p *pinger) remove(c *gorillaConn) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// loop pings every connection each interval; it ends when there is none left (add starts it again).
func (p *pinger) loop() {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	var conns []*gorillaConn
	for range t.C {
		p.mu.Lock()
		if len(p.conns) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		conns = conns[:0]
		for c := range p.conns {
			conns = append(conns, c)
		}
		p.mu.Unlock()
		for _, c := range conns {
			c.keepAlive()
		}
	}
}
