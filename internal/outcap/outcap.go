// Package outcap collects the output of a command run in a sandbox without
// holding more of it than it keeps: the last bytes of a stream, with every
// secret masked as the stream passes (also one split across writes or cut
// by the kept window), and a count of the bytes let go. A sandbox that
// answers with endless output costs the provider a bounded amount of memory.
package outcap

import (
	"bytes"
	"math"
	"sort"
)

// Masked replaces every secret value.
const Masked = "(sensitive)"

var masked = []byte(Masked)

// Capture is an io.Writer for one output stream. Secrets are replaced on
// the whole stream before anything is dropped, so what is kept never holds
// a secret, nor the part of one the cut would leave. It is not safe for
// concurrent writes; use one per stream.
type Capture struct {
	secrets [][]byte  // longest first, so a longer secret wins at a position
	first   [256]bool // first bytes of the secrets: positions worth checking
	carry   []byte    // end of the stream that may begin a secret
	scratch []byte    // carry + the next write
	tail    tail
}

// New returns a Capture keeping the last keep bytes (none when keep <= 0)
// with every non-empty value of secrets replaced by Masked.
func New(keep int, secrets []string) *Capture {
	c := &Capture{tail: tail{max: max(keep, 0)}}
	for _, s := range secrets {
		if s != "" {
			c.secrets = append(c.secrets, []byte(s))
			c.first[s[0]] = true
		}
	}
	sort.SliceStable(c.secrets, func(i, j int) bool { return len(c.secrets[i]) > len(c.secrets[j]) })
	return c
}

// Mask replaces the secrets in a whole text, as a Capture does in a stream.
func Mask(text string, secrets []string) string {
	c := New(math.MaxInt, secrets)
	_, _ = c.Write([]byte(text))
	b, _ := c.Bytes()
	return string(b)
}

// Write masks p (with what earlier writes left undecided) and keeps the
// end of the result. It never fails.
func (c *Capture) Write(p []byte) (int, error) {
	if len(c.secrets) == 0 {
		c.tail.write(p)
		return len(p), nil
	}
	data := p
	if len(c.carry) > 0 {
		c.scratch = append(append(c.scratch[:0], c.carry...), p...)
		data = c.scratch
	}
	held := c.mask(data, false)
	c.carry = append(c.carry[:0], data[held:]...)
	return len(p), nil
}

// Bytes ends the stream and returns the kept bytes and how many bytes of
// the masked stream were dropped before them.
func (c *Capture) Bytes() ([]byte, int64) {
	if len(c.carry) > 0 {
		c.mask(c.carry, true)
		c.carry = c.carry[:0]
	}
	return c.tail.bytes(), c.tail.omitted
}

// mask passes data to the tail with secrets replaced and returns where the
// undecided end starts: bytes that are a prefix of a secret the next write
// may complete (none when final).
func (c *Capture) mask(data []byte, final bool) int {
	i, from := 0, 0
	for i < len(data) {
		if !c.first[data[i]] {
			i++
			continue
		}
		n, partial := c.matchAt(data[i:], final)
		if partial {
			break
		}
		if n == 0 {
			i++
			continue
		}
		c.tail.write(data[from:i])
		c.tail.write(masked)
		i += n
		from = i
	}
	c.tail.write(data[from:i])
	return i
}

// matchAt is the length of the secret data starts with, or partial when
// data is too short to tell (it is the beginning of a longer secret).
func (c *Capture) matchAt(data []byte, final bool) (n int, partial bool) {
	for _, s := range c.secrets {
		if bytes.HasPrefix(data, s) {
			return len(s), false
		}
		if !final && len(data) < len(s) && bytes.HasPrefix(s, data) {
			return 0, true
		}
	}
	return 0, false
}

// tail keeps the last max bytes written: buf grows to max, then is a ring
// whose oldest byte is at start.
type tail struct {
	max     int
	buf     []byte
	start   int
	omitted int64
}

func (t *tail) write(p []byte) {
	if len(p) >= t.max {
		t.omitted += int64(len(t.buf)) + int64(len(p)-t.max)
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		t.start = 0
		return
	}
	if room := t.max - len(t.buf); room > 0 {
		n := min(room, len(p))
		t.buf = append(t.buf, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(t.buf[t.start:], p)
		t.omitted += int64(n)
		t.start = (t.start + n) % t.max
		p = p[n:]
	}
}

func (t *tail) bytes() []byte {
	out := make([]byte, 0, len(t.buf))
	return append(append(out, t.buf[t.start:]...), t.buf[:t.start]...)
}
