package incus

// Operations started here are waited for with the server's own wait
// (GET /1.0/operations/{id}/wait), not with the client's Operation.Wait:
//
//   - The client's wait refreshes the operation with a plain GET while it
//     may still run. incusd 6.0.4 renders that answer from the operation's
//     live metadata map, and an exec writes its exit status into that map
//     as it ends; the two together crash the daemon ("fatal error:
//     concurrent map iteration and map write", seen under the initializer
//     tests, whose readiness probes end many short execs). The server-side
//     wait answers only once the operation is final.
//   - The client also opens an events websocket for every operation it
//     starts, a connection and a goroutine per exec.
//
// The wait answers differently across releases. incusd 6.0.5 and 6.12+
// answer a wait that timed out with the operation, still running. 6.0.4
// answers it with an error ("context deadline exceeded"), and answers an
// operation that failed with that failure as an error too. So an error
// answer is looked up in the operation list (GET /1.0/operations, which
// names each operation's status without rendering it, so it is safe where a
// plain GET is not): still running means wait again, failed means the
// answer was the operation's own error, absent means it vanished.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// waitSlice bounds one server-side wait, so a cancelled context is noticed
// within that time.
const waitSlice = 5 * time.Second

// answerWithin bounds how long a request the server answers at once may
// take. The Incus client takes no context per request, so an incusd that
// stops answering (seen with 6.0.4 under load) would otherwise hang a plan
// or an apply forever instead of failing it.
const answerWithin = time.Minute

// Backoff between attempts after a transient error.
const (
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// answered runs f, a request to the server, and gives up when ctx ends or
// after limit; the abandoned request ends with its connection.
func (d *Driver) answered(ctx context.Context, what string, limit time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("%s: no answer from the Incus server at %s within %s; %s: %w", what, d.address(), limit, hungHint, driver.ErrUnavailable)
	}
}

// startOperation sends a request that answers with an operation (path under
// /1.0, in the driver's project) and returns that operation. A transient
// failure is sent again within ctx, where sending twice is harmless: a
// refused connection or a 503 was never acted on; a reset connection may
// have been, so only idempotent requests (PUT, DELETE) are resent then.
func (d *Driver) startOperation(ctx context.Context, c incus.InstanceServer, method, path string, body any) (*api.Operation, error) {
	var resp *api.Response
	wait := firstBackoff
	for {
		err := d.answered(ctx, method+" "+path, answerWithin, func() (err error) {
			resp, _, err = c.RawQuery(method, "/1.0"+path+"?project="+url.QueryEscape(d.cfg.Project), body, "")
			return err
		})
		if err == nil {
			break
		}
		if !notActedOn(err) && (method == http.MethodPost || !connectionLost(err)) {
			return nil, err
		}
		if serr := sleepCtx(ctx, &wait); serr != nil {
			return nil, fmt.Errorf("%s %s: %w (last attempt: %v)", method, path, serr, err)
		}
	}
	op, err := resp.MetadataAsOperation()
	if err != nil {
		return nil, fmt.Errorf("%s %s: the answer is not an operation: %w", method, path, err)
	}
	return op, nil
}

// runOperation starts an operation and waits until it is final.
func (d *Driver) runOperation(ctx context.Context, c incus.InstanceServer, method, path string, body any) error {
	op, err := d.startOperation(ctx, c, method, path, body)
	if err != nil {
		return err
	}
	_, err = d.waitOperation(ctx, c, op)
	return err
}

// waitOperation waits until op is final and returns it; its failure (a
// failed command start, say) is returned as an *opFailure. An error answer
// of the wait itself is not final (see the header): it is waited again,
// with backoff when it came early, until the operation ends or ctx does.
// When ctx ends first, the operation is cancelled where it can be.
func (d *Driver) waitOperation(ctx context.Context, c incus.InstanceServer, op *api.Operation) (*api.Operation, error) {
	w := opWait{d: d, c: c, op: op, since: time.Now(), backoff: firstBackoff}
	for {
		final, err := w.once(ctx)
		if final != nil || err != nil {
			return final, err
		}
		if ctx.Err() != nil {
			_ = c.DeleteOperation(op.ID) // cancel, where the operation allows it
			return nil, w.unfinished(ctx.Err())
		}
	}
}

// opWait is one operation being waited for.
type opWait struct {
	d       *Driver
	c       incus.InstanceServer
	op      *api.Operation // as started: ID and description
	since   time.Time
	backoff time.Duration
	lastErr error // the last error answer, for the message when ctx ends
	ended   bool  // the operation list showed it final
}

// once runs one server-side wait. It returns the final operation, or an
// error that ends the wait, or neither: not final yet.
func (w *opWait) once(ctx context.Context) (*api.Operation, error) {
	slice := waitSlice
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < slice {
		slice = max(time.Until(deadline), time.Second)
	}
	began := time.Now()
	var resp *api.Response
	err := w.d.answered(ctx, "wait for operation "+w.op.ID, slice+answerWithin, func() (err error) {
		resp, _, err = w.c.RawQuery("GET", fmt.Sprintf("/1.0/operations/%s/wait?timeout=%d", url.PathEscape(w.op.ID), int(slice.Seconds())), nil, "")
		return err
	})
	if err == nil {
		got, perr := resp.MetadataAsOperation()
		if perr != nil {
			return nil, fmt.Errorf("wait for operation %s: the answer is not an operation: %w", w.op.ID, perr)
		}
		if !got.StatusCode.IsFinal() {
			return nil, nil // a newer server's answer to a wait that timed out
		}
		if got.Err != "" {
			return got, w.failure(got.Err)
		}
		return got, nil
	}
	if ctx.Err() != nil {
		return nil, nil //nolint:nilerr // the caller sees ctx end and cancels the operation
	}
	switch {
	case api.StatusErrorCheck(err, http.StatusNotFound):
		return nil, w.vanished()
	case errors.Is(err, driver.ErrUnavailable): // no answer at all: a hung server
		return nil, err
	}
	if msg, ok := serverAnswer(err); ok && w.ended {
		return nil, w.failure(msg) // 6.0.4's answer for an operation that failed
	}
	w.lastErr = err
	status, lerr := w.d.operationStatus(ctx, w.c, w.op.ID)
	switch {
	case lerr != nil:
		w.lastErr = fmt.Errorf("%v; listing operations: %v", err, lerr)
	case status == "":
		return nil, w.vanished()
	case status == "failure" || status == "cancelled" || status == "success":
		// It ended after this wait was answered, or this answer was its
		// failure: the next wait answers at once with its result.
		w.ended = true
		return nil, nil
	}
	// Still running: a 6.0.4 wait that timed out answers after its slice;
	// an error that came early (a 503, a reset connection) backs off first.
	if time.Since(began) >= slice/2 {
		w.backoff = firstBackoff
		return nil, nil
	}
	_ = sleepCtx(ctx, &w.backoff) // when ctx ends, the caller says so
	return nil, nil
}

// failure is the operation's own failure with what it was and how long it ran.
func (w *opWait) failure(msg string) error {
	return &opFailure{What: w.op.Description, ID: w.op.ID, Took: time.Since(w.since), Msg: msg}
}

func (w *opWait) vanished() error {
	return fmt.Errorf("%s (operation %s) vanished from the Incus server after %s before its result was read "+
		"(the server restarted, or it ended and was cleaned up); check the object's state with `incus list` and apply again",
		w.op.Description, w.op.ID, time.Since(w.since).Round(time.Second))
}

// unfinished is the error for an operation still running when ctx ended.
func (w *opWait) unfinished(cause error) error {
	msg := fmt.Sprintf("%s (operation %s) still running after %s", w.op.Description, w.op.ID, time.Since(w.since).Round(time.Second))
	if w.lastErr != nil {
		msg += fmt.Sprintf(" (the last wait answered: %v)", w.lastErr)
	}
	return fmt.Errorf("%s; raise the resource's timeouts if the server is this slow: %w", msg, cause)
}

// opFailure is an operation that ended in failure on the server.
type opFailure struct {
	What string // the operation's description: "Starting instance"
	ID   string
	Took time.Duration // from the start of the wait to its end
	Msg  string        // the server's error; last, so message checks on suffixes hold
}

func (e *opFailure) Error() string {
	return fmt.Sprintf("%s (operation %s) failed after %s: %s", e.What, e.ID, e.Took.Round(100*time.Millisecond), e.Msg)
}

// operationStatus is the status of operation id in the project's operation
// list ("running", "failure", ...), or "" when it is not listed.
func (d *Driver) operationStatus(ctx context.Context, c incus.InstanceServer, id string) (string, error) {
	var resp *api.Response
	err := d.answered(ctx, "list operations", answerWithin, func() (err error) {
		resp, _, err = c.RawQuery("GET", "/1.0/operations?project="+url.QueryEscape(d.cfg.Project), nil, "")
		return err
	})
	if err != nil {
		return "", err
	}
	var byStatus map[string][]string
	if err := resp.MetadataAsStruct(&byStatus); err != nil {
		return "", fmt.Errorf("the operation list is not a list: %w", err)
	}
	for status, urls := range byStatus {
		for _, u := range urls {
			if strings.HasSuffix(u, "/operations/"+id) {
				return status, nil
			}
		}
	}
	return "", nil
}

// serverAnswer is the message of an error the server sent as its answer,
// as opposed to one of the transport.
func serverAnswer(err error) (string, bool) {
	var se api.StatusError
	if errors.As(err, &se) {
		return se.Error(), true
	}
	return "", false
}

// notActedOn reports a request the server did not act on: refused at
// connect, or answered 503.
func notActedOn(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || api.StatusErrorCheck(err, http.StatusServiceUnavailable)
}

// connectionLost reports a connection that broke mid-request.
func connectionLost(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE)
}

// sleepCtx sleeps *wait (then doubles it, up to maxBackoff), or returns
// ctx's error when ctx ends first.
func sleepCtx(ctx context.Context, wait *time.Duration) error {
	timer := time.NewTimer(*wait)
	defer timer.Stop()
	*wait = min(2**wait, maxBackoff)
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
