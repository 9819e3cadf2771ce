package acctest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHD is a private sshd of one test, on its own loopback port, made from
// the configuration scripts/setup-sshd.sh wrote (same authorized keys,
// forwarding to the same Docker socket). A test may stop it, restart it, or
// restart it with another host key without disturbing other tests, which
// share the set-up's sshd on port 2222.
type SSHD struct {
	t    *testing.T
	Port int
	dir  string // the set-up's sshd directory (config, host keys)
	tmp  string
	cmd  *exec.Cmd
}

// Host keys an SSHD can serve: the set-up's host key, or its decoy (a key
// no known_hosts file trusts).
const (
	HostKeyReal  = "ssh_host_ed25519_key"
	HostKeyDecoy = "decoy_host_ed25519_key"
)

// StartSSHD starts a private sshd serving hostKey; it is stopped when the
// test ends.
func StartSSHD(t *testing.T, hostKey string) *SSHD {
	t.Helper()
	pid := TestEnv(EnvSSHDPidfile)
	if pid == "" {
		t.Fatalf("%s is unknown: run `scripts/setup-engines.sh ssh`", EnvSSHDPidfile)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	l.Close()
	if !ok {
		t.Fatalf("sshd: %s is not a TCP address", l.Addr())
	}
	s := &SSHD{t: t, Port: addr.Port, dir: filepath.Dir(pid), tmp: t.TempDir()}
	t.Cleanup(s.Stop)
	s.Start(hostKey)
	return s
}

// Host is the ssh:// URL of the sshd.
func (s *SSHD) Host() string { return fmt.Sprintf("ssh://root@127.0.0.1:%d", s.Port) }

// HostKeyFingerprint is the SHA256 fingerprint of one of the set-up's host
// keys (HostKeyReal, HostKeyDecoy).
func HostKeyFingerprint(t *testing.T, hostKey string) string {
	t.Helper()
	return ssh.FingerprintSHA256(hostPublicKey(t, hostKey))
}

// KnownHosts writes a known_hosts file trusting hostKey for this sshd.
func (s *SSHD) KnownHosts(path, hostKey string) {
	line := fmt.Sprintf("[127.0.0.1]:%d %s", s.Port, ssh.MarshalAuthorizedKey(hostPublicKey(s.t, hostKey)))
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func hostPublicKey(t *testing.T, hostKey string) ssh.PublicKey {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(TestEnv(EnvSSHDPidfile)), hostKey+".pub"))
	if err != nil {
		t.Fatalf("host key %s: %v (run `scripts/setup-engines.sh ssh`)", hostKey, err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	portLine    = regexp.MustCompile(`(?m)^\s*Port\s+.*$`)
	hostKeyLine = regexp.MustCompile(`(?m)^\s*HostKey\s+.*$`)
	pidLine     = regexp.MustCompile(`(?m)^\s*PidFile\s+.*$`)
)

// Start runs sshd in the foreground (-D) as a child of the test, serving
// hostKey, and waits until it answers.
func (s *SSHD) Start(hostKey string) {
	s.t.Helper()
	base, err := os.ReadFile(filepath.Join(s.dir, "sshd_config"))
	if err != nil {
		s.t.Fatalf("reading the set-up's sshd_config: %v (run `scripts/setup-engines.sh ssh`)", err)
	}
	conf := portLine.ReplaceAllString(string(base), "Port "+strconv.Itoa(s.Port))
	conf = hostKeyLine.ReplaceAllString(conf, "HostKey "+filepath.Join(s.dir, hostKey))
	conf = pidLine.ReplaceAllString(conf, "PidFile "+filepath.Join(s.tmp, "sshd.pid"))
	confPath := filepath.Join(s.tmp, "sshd_config")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = exec.Command("/usr/sbin/sshd", "-D", "-f", confPath, "-E", filepath.Join(s.tmp, "sshd.log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting sshd: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.answers() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.tmp, "sshd.log"))
			s.t.Fatalf("the private sshd on port %d did not answer within 10s:\n%s", s.Port, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answers reports whether the port greets with an SSH banner.
func (s *SSHD) answers() bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "SSH-2.0")
}

// Stop kills the sshd and every connection it serves (each is a child
// process of the listener), as a crashed or stopped server would drop them.
func (s *SSHD) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	pid := s.cmd.Process.Pid
	for _, child := range childrenOf(pid) {
		if p, err := os.FindProcess(child); err == nil {
			_ = p.Kill() // SIGKILL; os, not syscall, so the package builds everywhere
		}
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ")".
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			if n, err := strconv.Atoi(filepath.Base(filepath.Dir(st))); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
