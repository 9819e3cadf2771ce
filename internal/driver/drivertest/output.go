package drivertest

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"

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
	var before, done runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := sc.exec(t, in.ID, driver.ExecSpec{Command: []string{"sh", "-c", script, "sh", secret}, MaxOutput: keep, Mask: []string{secret}})
	runtime.ReadMemStats(&done)
	allocated := done.TotalAlloc - before.TotalAlloc
	t.Logf("reading %d bytes of output allocated %d bytes", flood, allocated)
	if allocated > flood/8 {
		t.Errorf("reading %d bytes of output allocated %d bytes: the driver holds what it drops", flood, allocated)
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
