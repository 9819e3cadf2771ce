package agent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// ProbeTimeout bounds one probe attempt; callers retry with their own deadline.
const ProbeTimeout = 3 * time.Second

// runProbe makes one attempt and maps ready / not ready to 0 / 1.
func runProbe(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		return usageError(stderr, "probe: want tcp PORT | http PORT PATH [STATUS] | pid PIDFILE")
	}
	err := probe(args[0], args[1:])
	var ue usageErr
	switch {
	case errors.As(err, &ue):
		return usageError(stderr, "probe %s: %v", args[0], err)
	case err != nil:
		fmt.Fprintf(stderr, "not ready: %v\n", err)
		return ExitNotReady
	}
	return 0
}

// usageErr marks bad arguments as opposed to a target that is not ready.
type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

func probe(kind string, args []string) error {
	switch kind {
	case ProbeTCP:
		if len(args) != 1 {
			return usageErr{"want PORT"}
		}
		port, err := parsePort(args[0])
		if err != nil {
			return err
		}
		return probeTCP(port)
	case ProbeHTTP:
		return probeHTTPArgs(args)
	case ProbePID:
		if len(args) != 1 {
			return usageErr{"want PIDFILE"}
		}
		return probePID(args[0])
	}
	return usageErr{fmt.Sprintf("unknown probe %q (want tcp, http or pid)", kind)}
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, usageErr{fmt.Sprintf("bad port %q", s)}
	}
	return p, nil
}

// probeTCP connects to the port on IPv4 loopback, then IPv6 loopback, since
// a server may listen on either.
func probeTCP(port int) error {
	var first error
	for _, host := range []string{"127.0.0.1", "::1"} {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), ProbeTimeout)
		if err == nil {
			c.Close()
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func probeHTTPArgs(args []string) error {
	if len(args) < 2 || len(args) > 3 {
		return usageErr{"want PORT PATH [STATUS]"}
	}
	port, err := parsePort(args[0])
	if err != nil {
		return err
	}
	status := 0
	if len(args) == 3 {
		status, err = strconv.Atoi(args[2])
		if err != nil || status < 100 || status > 599 {
			return usageErr{fmt.Sprintf("bad status %q", args[2])}
		}
	}
	return probeHTTP(port, args[1], status)
}

// probeHTTP GETs the path without following redirects: want 0 accepts any
// 2xx or 3xx status, otherwise exactly want.
func probeHTTP(port int, path string, want int) error {
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	client := &http.Client{
		Timeout:       ProbeTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{Proxy: nil}, // never a proxy from the environment
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + path
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	ok := resp.StatusCode == want
	if want == 0 {
		ok = resp.StatusCode >= 200 && resp.StatusCode < 400
	}
	if !ok {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return nil
}

// runTail prints the last N bytes of a file.
func runTail(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int64("bytes", 4096, "how many bytes from the end")
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, "tail: %v", err)
	}
	if fs.NArg() != 1 || *n < 0 {
		return usageError(stderr, "tail: want --bytes N PATH")
	}
	if err := tail(stdout, fs.Arg(0), *n); err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: tail: %v\n", err)
		return 1
	}
	return 0
}

func tail(w io.Writer, path string, n int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if off := st.Size() - n; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
	}
	_, err = io.Copy(w, io.LimitReader(f, n))
	return err
}
