package sshconn

import (
	"net"
	"syscall"
)

// quickAck makes the connection acknowledge what it receives at once.
//
// sshd leaves Nagle's algorithm on for sessions without a terminal, so a
// small reply that follows another (the channel confirmation after sshd's
// post-auth host-key announcement, say) waits for our ACK of the first,
// and Linux delays that ACK by up to 40 ms: measured here, every SSH
// connection's first channel took 40 ms more than it needs. TCP_QUICKACK is
// not sticky, so it is set again before every read.
func quickAck(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &quickAckConn{TCPConn: tc, raw: raw}
}

type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	_ = c.raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
	return c.TCPConn.Read(p)
}
