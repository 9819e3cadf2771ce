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

import (
	"context"
	"errors"
	"fmt"
	"net/url"
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
// /1.0, in the driver's project) and returns that operation.
func (d *Driver) startOperation(ctx context.Context, c incus.InstanceServer, method, path string, body any) (*api.Operation, error) {
	var resp *api.Response
	err := d.answered(ctx, method+" "+path, answerWithin, func() (err error) {
		resp, _, err = c.RawQuery(method, "/1.0"+path+"?project="+url.QueryEscape(d.cfg.Project), body, "")
		return err
	})
	if err != nil {
		return nil, err
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
	_, err = d.waitOperation(ctx, c, op.ID)
	return err
}

// waitOperation waits until operation id is final and returns it; its
// error (a failed command start, say) is returned as an error. When ctx
// ends first, the operation is cancelled where it can be.
func (d *Driver) waitOperation(ctx context.Context, c incus.InstanceServer, id string) (*api.Operation, error) {
	for {
		slice := waitSlice
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < slice {
			slice = max(time.Until(deadline), time.Second)
		}
		var op *api.Operation
		err := d.answered(ctx, "wait for operation "+id, slice+answerWithin, func() (err error) {
			op, _, err = c.GetOperationWait(id, int(slice.Seconds()))
			return err
		})
		if err != nil {
			return nil, err
		}
		if op.StatusCode.IsFinal() {
			if op.Err != "" {
				return op, errors.New(op.Err)
			}
			return op, nil
		}
		if err := ctx.Err(); err != nil {
			_ = c.DeleteOperation(id) // cancel, where the operation allows it
			return op, err
		}
	}
}
