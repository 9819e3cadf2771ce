package incus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// translate maps Incus errors onto the driver's sentinels, keeping the
// server's message. Errors that already wrap a sentinel pass unchanged.
func translate(err error) error {
	for _, s := range []error{driver.ErrNotFound, driver.ErrAlreadyExists, driver.ErrUnsupported, driver.ErrUnavailable} {
		if errors.Is(err, s) {
			return err
		}
	}
	switch {
	case api.StatusErrorCheck(err, http.StatusNotFound), isNotFoundMessage(err):
		return fmt.Errorf("%v: %w", err, driver.ErrNotFound)
	case api.StatusErrorCheck(err, http.StatusConflict), isExistsMessage(err):
		return fmt.Errorf("%v: %w", err, driver.ErrAlreadyExists)
	case noAnswer(err):
		return fmt.Errorf("%v: %s: %w", err, hungHint, driver.ErrUnavailable)
	case serverDeadline(err):
		return fmt.Errorf("%v: %s: %w", err, serverDeadlineHint, driver.ErrUnavailable)
	case isConnError(err):
		return fmt.Errorf("%v: %w", err, driver.ErrUnavailable)
	}
	return err
}

// hungHint is what to check when the server stops answering.
const hungHint = "the Incus server may be hung (does `incus info` answer? its log is /var/log/incus/incusd.log or the journal)"

// serverDeadlineHint is what to check when incusd gave up on a deadline of
// its own. The answer does not say why; the logs do. A start whose LXC hook
// timed out says more (start.go), with the evidence from lxc.log.
const serverDeadlineHint = "incusd gave up on a deadline of its own; what it waited for is in the instance's log " +
	"(`incus info --show-log --project PROJECT NAME`) and in incusd's log (/var/log/incus/incusd.log or the journal); " +
	"apply again once that is resolved"

// serverDeadline reports "context deadline exceeded" in the server's answer
// (an operation's or a request's error), not our own context ending, which
// arrives as context.DeadlineExceeded itself. A 6.0.4 wait that timed out
// answers the same words; waitOperation never passes that on.
func serverDeadline(err error) bool {
	return !errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "context deadline exceeded")
}

// noAnswer reports a request the transport gave up on (boundAnswers).
func noAnswer(err error) bool {
	var ue *url.Error
	return (errors.As(err, &ue) && ue.Timeout()) || strings.Contains(err.Error(), "timeout awaiting response headers")
}

// isNotFoundMessage catches not-found errors that lost their status code
// on the way (operation results carry only the message).
func isNotFoundMessage(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.HasSuffix(msg, "not found") || strings.Contains(msg, "not found:")
}

// isExistsMessage catches name clashes reported by a failed operation (the
// database's unique constraint) rather than by a 409.
func isExistsMessage(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "already exists") || strings.Contains(msg, "UNIQUE constraint failed")
}

func isConnError(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}
