package driver

import "errors"

// Sentinel errors. Drivers wrap them with context (backend, object, cause):
//
//	fmt.Errorf("docker backend %q: container %q: %w", b, id, driver.ErrNotFound)
var (
	// ErrNotFound: the object does not exist on the engine.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: an object with that name exists and is not ours to adopt.
	ErrAlreadyExists = errors.New("already exists")
	// ErrUnsupported: the backend cannot do what was asked (e.g. a VM on Docker).
	ErrUnsupported = errors.New("not supported by this backend")
	// ErrUnavailable: the engine could not be reached.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrInvalid: the request reached the engine but cannot work as
	// written (a command that does not exist, an archive that is no tar):
	// the configuration must change.
	ErrInvalid = errors.New("invalid configuration")
	// ErrInUse: the engine will not remove an object that something still
	// uses (a backend's scope with instances or volumes in it).
	ErrInUse = errors.New("still in use")
)

// AdvisedError is an engine failure whose remedy only the driver knows (an
// engine bug with its workaround). The provider shows Advice in place of
// the generic advice for the error's sentinel.
type AdvisedError struct {
	Err    error
	Advice string
}

func (e *AdvisedError) Error() string { return e.Err.Error() }
func (e *AdvisedError) Unwrap() error { return e.Err }

// WithAdvice attaches what to do about err; nil stays nil.
func WithAdvice(err error, advice string) error {
	if err == nil {
		return nil
	}
	return &AdvisedError{Err: err, Advice: advice}
}

// IsNotFound reports whether err wraps ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
