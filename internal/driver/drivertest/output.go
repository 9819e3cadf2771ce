package drivertest

import (
	"bytes"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/outcap"
)

// testExecOutputBounded: a command that answers with 1 GiB costs the
// provider a bounded amount of memory; the result keeps the end of each
// stream, counts the rest, and masks a secret the cut falls into.
func testExecOutputBounded(t *testing.T, s *suite) {
	sc := s.open(t)
	in := sc.create(t, sc.spec("flood"))
	const (
		flood = 1 << 30
		keep  = 4096
		after = 4090 // zero bytes printed after the secret: the cut falls inside it
	)
	secret := "flood-" + uniqueName("secret")
	script := "head -c " + strconv.Itoa(flood) + " /dev/zero && printf %s \"$1\" && head -c " + strconv.Itoa(after) + " /dev/zero && printf 'err %s\\n' \"$1\" >&2"
	runtime.GC()
	base := heapObjects()
	peak := watchHeap()
	res := sc.exec(t, in.ID, driver.ExecSpec{Command: []string{"sh", "-c", script, "sh", secret}, MaxOutput: keep, Mask: []string{secret}})
	grown := int64(peak()) - int64(base)
	t.Logf("reading %d bytes of output grew the heap by at most %d bytes", flood, grown)
	if grown > flood/8 {
		t.Errorf("reading %d bytes of output grew the heap by %d bytes: the driver holds what it drops", flood, grown)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	masked := int64(flood + len(outcap.Masked) + after)
	wantTail := outcap.Masked[len(outcap.Masked)-(keep-after):] + strings.Repeat("\x00", after)
	if string(res.Stdout) != wantTail || res.StdoutOmitted != masked-keep {
		head := res.Stdout[:min(len(res.Stdout), 16)]
		t.Errorf("stdout: %d bytes kept starting %q, %d omitted; want %d bytes starting %q, %d omitted",
			len(res.Stdout), head, res.StdoutOmitted, keep, wantTail[:16], masked-keep)
	}
	if bytes.Contains(res.Stdout, []byte(secret[len(secret)-4:])) {
		t.Errorf("stdout keeps the end of the secret: %q", res.Stdout[:32])
	}
	if string(res.Stderr) != "err "+outcap.Masked+"\n" || res.StderrOmitted != 0 {
		t.Errorf("stderr %q (%d omitted), want %q", res.Stderr, res.StderrOmitted, "err "+outcap.Masked+"\n")
	}
}

// heapObjects is the heap's occupied bytes (live and not yet swept), read
// without stopping the world.
func heapObjects() uint64 {
	m := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// watchHeap samples heapObjects until the returned function is called,
// which returns the largest value seen. Transports that allocate per
// packet (SSH) make garbage, which the collector frees; output held would
// show here.
func watchHeap() func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		highest := heapObjects()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- max(highest, heapObjects())
				return
			case <-tick.C:
				highest = max(highest, heapObjects())
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
