package outcap

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// collect writes stream in the given chunk sizes (cycled) and returns what
// the Capture kept and dropped.
func collect(keep int, secrets []string, stream string, chunks ...int) (string, int64) {
	c := New(keep, secrets)
	for i, k := 0, 0; i < len(stream); k++ {
		n := len(stream) - i
		if len(chunks) > 0 {
			n = min(n, chunks[k%len(chunks)])
		}
		if w, err := c.Write([]byte(stream[i : i+n])); w != n || err != nil {
			panic("short write")
		}
		i += n
	}
	b, omitted := c.Bytes()
	return string(b), omitted
}

func lastN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func TestTailKeepsEndAndCountsTheRest(t *testing.T) {
	cases := []struct {
		name, stream string
		keep         int
		chunks       []int
		kept         string
		omitted      int64
	}{
		{"short", "hello", 8, nil, "hello", 0},
		{"exact", "12345678", 8, []int{3}, "12345678", 0},
		{"one write past", "0123456789", 8, nil, "23456789", 2},
		{"ring wraps", "abcdefghijklmnopqrstuvwxyz", 5, []int{3}, "vwxyz", 21},
		{"byte by byte", "abcdefghijklmnopqrstuvwxyz", 5, []int{1}, "vwxyz", 21},
		{"keep nothing", "abc", 0, []int{2}, "", 3},
		{"empty", "", 4, nil, "", 0},
	}
	for _, tc := range cases {
		kept, omitted := collect(tc.keep, nil, tc.stream, tc.chunks...)
		if kept != tc.kept || omitted != tc.omitted {
			t.Errorf("%s: kept %q omitted %d, want %q %d", tc.name, kept, omitted, tc.kept, tc.omitted)
		}
	}
}

func TestMaskStraddlingWritesAndTheCut(t *testing.T) {
	const secret = "s3cr3t-value"
	stream := "head " + secret + " middle " + secret + secret + " end s3cr3t-valu" // the last is no secret
	want := strings.ReplaceAll(stream, secret, Masked)
	for keep := 1; keep <= len(want)+2; keep++ {
		for chunk := 1; chunk <= len(stream); chunk++ {
			kept, omitted := collect(keep, []string{secret}, stream, chunk)
			if kept != lastN(want, keep) || omitted != int64(len(want)-len(kept)) {
				t.Fatalf("keep %d chunk %d: kept %q omitted %d, want %q %d", keep, chunk, kept, omitted, lastN(want, keep), len(want)-len(lastN(want, keep)))
			}
		}
	}
}

// TestNoSecretPieceAtTheCut is the attack: a command prints a secret so
// that the kept window starts in its middle. Cutting first and masking
// after (what Truncate then mask did) would keep the secret's end.
func TestNoSecretPieceAtTheCut(t *testing.T) {
	const secret = "TOPSECRETPASSWORD"
	stream := strings.Repeat("x", 100) + secret + "tail"
	cut := lastN(stream, 12) // "PASSWORDtail" with cut-then-mask
	if !strings.Contains(cut, "PASSWORD") {
		t.Fatalf("the test no longer puts the cut inside the secret: %q", cut)
	}
	kept, omitted := collect(12, []string{secret}, stream, 7)
	if strings.Contains(kept, "PASSWORD") || kept != lastN(Masked+"tail", 12) {
		t.Errorf("kept %q, want the end of the masked stream %q", kept, lastN(Masked+"tail", 12))
	}
	if want := int64(100 + len(Masked) + 4 - 12); omitted != want {
		t.Errorf("omitted %d, want %d", omitted, want)
	}
}

func TestMaskSeveralSecrets(t *testing.T) {
	secrets := []string{"ab", "abcd", "", "zz"}
	cases := []struct{ stream, want string }{
		{"xabcdx", "x" + Masked + "x"},                           // the longer secret wins
		{"xabcx", "x" + Masked + "cx"},                           // not the longer one: the shorter
		{"abab", Masked + Masked},                                // back to back
		{"zzz", Masked + "z"},                                    // left to right, no overlap
		{"xab", "x" + Masked},                                    // a prefix of "abcd" at the end
		{"abc", Masked + "c"},                                    // ditto, one byte further
		{"\xffzz\x00", "\xff" + Masked + "\x00"},                 // any bytes
		{strings.Repeat("a", 5), strings.Repeat("a", 5)},         // near misses
		{"aabcdabzzab", "a" + Masked + Masked + Masked + Masked}, // mixed
	}
	for _, tc := range cases {
		for chunk := 1; chunk <= len(tc.stream); chunk++ {
			if kept, _ := collect(64, secrets, tc.stream, chunk); kept != tc.want {
				t.Errorf("%q chunk %d: kept %q, want %q", tc.stream, chunk, kept, tc.want)
			}
		}
	}
}

// TestMaskRandomStreams compares with masking the whole stream at once, for
// random streams, windows and write sizes.
func TestMaskRandomStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const secret = "k3y!"
	for range 2000 {
		var b strings.Builder
		for range r.IntN(40) {
			switch r.IntN(3) {
			case 0:
				b.WriteString(secret)
			case 1:
				b.WriteString(secret[:1+r.IntN(len(secret)-1)])
			default:
				b.WriteByte("k3y!x"[r.IntN(5)])
			}
		}
		stream := b.String()
		want := strings.ReplaceAll(stream, secret, Masked)
		keep := r.IntN(30)
		chunks := []int{1 + r.IntN(6), 1 + r.IntN(6)}
		kept, omitted := collect(keep, []string{secret}, stream, chunks...)
		if kept != lastN(want, keep) || omitted != int64(len(want)-len(kept)) {
			t.Fatalf("stream %q keep %d chunks %v: kept %q omitted %d, want %q", stream, keep, chunks, kept, omitted, lastN(want, keep))
		}
	}
}

// TestLargeStreamBoundedMemory writes 256 MiB and checks the Capture's
// allocations do not grow with it.
func TestLargeStreamBoundedMemory(t *testing.T) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 2048) // 32 KiB
	c := New(4096, []string{"s3cret"})
	allocs := testing.AllocsPerRun(8192, func() { _, _ = c.Write(chunk) })
	if allocs > 0 {
		t.Errorf("%v allocations per 32 KiB write, want none once warm", allocs)
	}
	kept, omitted := c.Bytes()
	if len(kept) != 4096 || omitted < 8192*int64(len(chunk))-4096 {
		t.Errorf("kept %d bytes, omitted %d", len(kept), omitted)
	}
}
