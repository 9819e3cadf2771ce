package acctest

import (
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Proxy forwards a loopback port to a target address. Stop makes the port
// refuse connections and drops those open, which is what a client sees of
// a remote daemon that went down; Start brings it back on the same port.
// Tests use it instead of stopping a daemon other tests share.
type Proxy struct {
	t      *testing.T
	Port   int
	target string

	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
}

// StartProxy starts a proxy to target, stopped when the test ends.
func StartProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p := &Proxy{t: t, target: target}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// Addr is 127.0.0.1:<port>.
func (p *Proxy) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)) }

// Start listens (again) on the proxy's port.
func (p *Proxy) Start() {
	p.t.Helper()
	var l net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port of a just-closed listener may linger briefly
		if l, err = net.Listen("tcp", p.Addr()); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy: listen on %s: %v", p.Addr(), err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		l.Close()
		p.t.Fatalf("proxy: %s is not a TCP address", l.Addr())
	}
	p.mu.Lock()
	p.l, p.Port = l, addr.Port
	p.mu.Unlock()
	go p.serve(l)
}

func (p *Proxy) serve(l net.Listener) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); out.Close() }()
		go func() { _, _ = io.Copy(in, out); in.Close() }()
	}
}

// Stop closes the listener and every forwarded connection.
func (p *Proxy) Stop() {
	p.mu.Lock()
	l, conns := p.l, p.conns
	p.l, p.conns = nil, nil
	p.mu.Unlock()
	if l != nil {
		l.Close()
	}
	for _, c := range conns {
		c.Close()
	}
}
