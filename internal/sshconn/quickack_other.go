//go:build !linux

package sshconn

import "net"

// quickAck is Linux-only (TCP_QUICKACK); elsewhere the connection is as dialled.
func quickAck(c net.Conn) net.Conn { return c }
