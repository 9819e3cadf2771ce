package incus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"
)

// Exec streams. The Incus client's own handling of a non-interactive exec
// (InstanceExecArgs with Stdout/Stderr writers and DataDone) loses output
// under load, and says nothing: the server pings every websocket as soon as
// it is connected, so the first frame the client reads on stdout/stderr is
// often that ping. When the command is quick (or the client slow), the
// server has already sent the output and the end-of-stream barrier and
// closed the connection by then; gorilla/websocket's default ping handler
// answers with a pong, the write fails (EPIPE), and that error is returned by
// NextReader, so the frames still buffered (the output) are never read. The
// client's MirrorWrite drops the error and closes DataDone anyway: exit
// status right, output empty. Waiting for DataDone does not help, it is
// closed either way.
//
// execStreams therefore drives the exec websockets itself: the control
// channel first (so the server never takes our stdout close for a vanished
// client and kills the command), then stdin, stdout and stderr (the server
// starts the command once those three are connected). A ping whose pong
// cannot be sent is ignored, every output stream is read up to its barrier,
// and a stream that ends any other way is an error, never empty output.

// execFDs are the websocket secrets of an exec operation.
type execFDs struct{ control, stdin, stdout, stderr string }

func execFDsOf(op api.Operation) (execFDs, error) {
	raw, _ := op.Metadata["fds"].(map[string]any)
	get := func(k string) string { s, _ := raw[k].(string); return s }
	fds := execFDs{control: get(api.SecretNameControl), stdin: get("0"), stdout: get("1"), stderr: get("2")}
	if fds.stdin == "" || fds.stdout == "" || fds.stderr == "" {
		return fds, fmt.Errorf("the exec operation offers no stdin/stdout/stderr websockets (metadata %v)", op.Metadata)
	}
	return fds, nil
}

// execStreams are the connected websockets of one exec.
type execStreams struct {
	control, stdin, stdout, stderr *websocket.Conn
	closeOnce                      sync.Once
}

// connectExec connects the exec's websockets in the order the server
// needs them.
func connectExec(c incus.InstanceServer, opID string, fds execFDs) (*execStreams, error) {
	s := &execStreams{}
	dial := func(secret string) (*websocket.Conn, error) {
		conn, err := c.GetOperationWebsocket(opID, secret)
		if err != nil {
			return nil, err
		}
		tolerantPings(conn)
		return conn, nil
	}
	var err error
	if fds.control != "" {
		if s.control, err = dial(fds.control); err != nil {
			return s, fmt.Errorf("connect the control stream: %w", err)
		}
		go func(conn *websocket.Conn) { // consume the server's messages (and pings)
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					return
				}
			}
		}(s.control)
	}
	if s.stdin, err = dial(fds.stdin); err != nil {
		return s, fmt.Errorf("connect stdin: %w", err)
	}
	if s.stdout, err = dial(fds.stdout); err != nil {
		return s, fmt.Errorf("connect stdout: %w", err)
	}
	if s.stderr, err = dial(fds.stderr); err != nil {
		return s, fmt.Errorf("connect stderr: %w", err)
	}
	return s, nil
}

// connectLimit bounds the websocket handshakes of one exec. The client's
// own handshake timeout does not hold on SSH channels (they have no
// deadlines), and a stalled handshake must fail the exec, not hang it.
const connectLimit = 30 * time.Second

// connectExecWithin is connectExec bounded by ctx and limit. Streams that
// connect after the caller gave up are closed as soon as they do.
func connectExecWithin(ctx context.Context, c incus.InstanceServer, opID string, fds execFDs, limit time.Duration) (*execStreams, error) {
	type result struct {
		s   *execStreams
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := connectExec(c, opID, fds)
		done <- result{s, err}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	giveUp := func(why error) (*execStreams, error) {
		go func() { r := <-done; r.s.close() }()
		return &execStreams{}, fmt.Errorf("connect the exec streams: %w", why)
	}
	select {
	case r := <-done:
		return r.s, r.err
	case <-ctx.Done():
		return giveUp(ctx.Err())
	case <-timer.C:
		return giveUp(fmt.Errorf("the server did not complete the websocket handshakes within %s", limit))
	}
}

// tolerantPings answers pings without letting a failed pong (the server
// already closed the connection) end the reading of frames still buffered.
func tolerantPings(conn *websocket.Conn) {
	conn.SetPingHandler(func(data string) error {
		_ = conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		return nil
	})
}

// feed sends stdin, then the barrier that ends it (EOF for the command). A
// command that exits without reading its input is not an error.
func (s *execStreams) feed(stdin []byte) {
	const chunk = 32 << 10
	for len(stdin) > 0 {
		n := min(chunk, len(stdin))
		if err := s.stdin.WriteMessage(websocket.BinaryMessage, stdin[:n]); err != nil {
			return
		}
		stdin = stdin[n:]
	}
	_ = s.stdin.WriteMessage(websocket.TextMessage, []byte{})
	_ = s.stdin.Close() // as the Incus client does: the server has all it needs
}

// drain reads one output stream up to the server's barrier (an empty text
// message) or a normal close. One buffer serves every message: io.Copy
// would allocate one per message.
func drain(conn *websocket.Conn, w io.Writer) error {
	buf := make([]byte, 32<<10)
	for {
		mt, r, err := conn.NextReader()
		if err != nil {
			if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				return nil
			}
			return err
		}
		switch mt {
		case websocket.TextMessage: // the barrier: end of stream
			return nil
		case websocket.BinaryMessage:
			if _, err := io.CopyBuffer(w, r, buf); err != nil {
				return err
			}
		}
	}
}

// signal asks the server to send sig to the command (through control).
func (s *execStreams) signal(sig int) {
	if s.control == nil {
		return
	}
	_ = s.control.WriteJSON(api.InstanceExecControl{Command: "signal", Signal: sig})
}

// close closes every connection (once).
func (s *execStreams) close() {
	s.closeOnce.Do(func() {
		for _, c := range []*websocket.Conn{s.stdout, s.stderr} {
			if c != nil {
				_ = c.Close()
			}
		}
	})
}

// streamExec starts req in instance id, copies its output streams to
// stdout and stderr, and returns its exit status once the operation has
// ended AND both output streams have reached their barrier. The returned error wraps the operation's
// error (the command could not start) or says which stream failed. When ctx
// ends first, the command is killed.
func (d *Driver) streamExec(ctx context.Context, c incus.InstanceServer, id string, req api.InstanceExecPost, stdin []byte, stdout, stderr io.Writer) (int, error) {
	req.WaitForWS, req.Interactive, req.RecordOutput = true, false, false
	opAPI, err := d.startOperation(ctx, c, "POST", "/instances/"+url.PathEscape(id)+"/exec", req)
	if err != nil {
		return 0, err
	}
	fds, err := execFDsOf(*opAPI)
	if err != nil {
		_ = c.DeleteOperation(opAPI.ID)
		return 0, err
	}
	s, err := connectExecWithin(ctx, c, opAPI.ID, fds, connectLimit)
	defer s.close()
	if err != nil {
		// The server gives up on its own when not every stream connects
		// (5 s); report the connect failure unless the op says more.
		if _, werr := d.waitOperation(ctx, c, opAPI); werr != nil {
			return 0, fmt.Errorf("%w (%v)", werr, err)
		}
		return 0, err
	}
	go s.feed(stdin)

	errs := make(chan error, 2)
	go func() {
		if err := drain(s.stdout, stdout); err != nil {
			errs <- fmt.Errorf("reading stdout: %w", err)
			return
		}
		errs <- nil
	}()
	go func() {
		if err := drain(s.stderr, stderr); err != nil {
			errs <- fmt.Errorf("reading stderr: %w", err)
			return
		}
		errs <- nil
	}()
	var streamErr error
	for range 2 {
		select {
		case err := <-errs:
			streamErr = errors.Join(streamErr, err)
		case <-ctx.Done():
			s.signal(9)
			s.close()
			return 0, ctx.Err()
		}
	}
	final, err := d.waitOperation(ctx, c, opAPI)
	if err != nil {
		if ctx.Err() != nil {
			s.signal(9)
		}
		return 0, err
	}
	if streamErr != nil {
		return 0, streamErr
	}
	code, ok := exitStatus(*final)
	if !ok {
		return 0, fmt.Errorf("the exec operation ended without an exit status (metadata %v)", final.Metadata)
	}
	return code, nil
}

// exitStatus is the command's exit status from the operation's metadata.
func exitStatus(op api.Operation) (int, bool) {
	switch v := op.Metadata["return"].(type) {
	case float64:
		return int(v), true
	case int:
		return v, true
	case int64:
		return int(v), true
	}
	return 0, false
}
