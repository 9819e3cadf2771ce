package sshconn

import (
	"io"
	"net"
	"syscall"
	"testing"
)

// quickAck wraps TCP connections only, keeps them readable, and leaves
// TCP_QUICKACK set after a read.
func TestQuickAck(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if quickAck(a) != a {
		t.Error("a pipe was wrapped")
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("SSH-2.0-test\r\n"))
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := quickAck(raw)
	defer c.Close()
	qc, ok := c.(*quickAckConn)
	if !ok {
		t.Fatalf("a TCP connection came back as %T", c)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "SSH-2.0-test\r\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	var on int
	_ = qc.raw.Control(func(fd uintptr) { on, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK) })
	if err != nil || on != 1 {
		t.Errorf("TCP_QUICKACK = %d, %v after a read", on, err)
	}
}
