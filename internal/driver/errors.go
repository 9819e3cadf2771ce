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
)

// IsNotFound reports whether err wraps ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
