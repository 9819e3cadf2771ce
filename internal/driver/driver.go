package driver

import (
	"context"
	"time"
)

// Driver is one connected backend. Implementations are safe for concurrent
// use: the provider shares one Driver per backend among all resources.
//
// Every object a driver creates carries the labels of Labels(...) so that
// List calls can filter by backend and leaks can always be found.
type Driver interface {
	// Info reports the engine and what it can do.
	Info(ctx context.Context) (Info, error)
	// EnsureScope creates the backend's scope (network, project, directory)
	// if missing; idempotent.
	EnsureScope(ctx context.Context) error
	// DeleteScope removes the scope; objects still in it are an error.
	DeleteScope(ctx context.Context) error

	EnsureImage(ctx context.Context, spec ImageSpec) (Image, error)
	// InspectImage finds an image by name or ID.
	InspectImage(ctx context.Context, ref string) (Image, error)
	// DeleteImage removes the name; the image itself goes when nothing else uses it.
	DeleteImage(ctx context.Context, name, id string) error

	CreateVolume(ctx context.Context, spec VolumeSpec) (Volume, error)
	InspectVolume(ctx context.Context, name string) (Volume, error)
	DeleteVolume(ctx context.Context, name string) error

	// CreateInstance creates the instance, copies its files in and starts it
	// when spec.Running. On error nothing it created is left behind.
	CreateInstance(ctx context.Context, spec InstanceSpec) (Instance, error)
	InspectInstance(ctx context.Context, id string) (Instance, error)
	// ListInstances lists this backend's instances with a few label-filtered
	// calls; it must not cost one call per instance.
	ListInstances(ctx context.Context) ([]Instance, error)
	StartInstance(ctx context.Context, id string) error
	StopInstance(ctx context.Context, id string, grace time.Duration) error
	// UpdateInstance changes limits in place.
	UpdateInstance(ctx context.Context, id string, limits Limits) error
	DeleteInstance(ctx context.Context, id string) error

	Exec(ctx context.Context, id string, spec ExecSpec) (ExecResult, error)
	CopyFiles(ctx context.Context, id string, files []File) error

	// Close releases connections.
	Close() error
}

// Factory opens a driver for a config. Opening should be cheap; the
// connection may be established lazily on first use.
type Factory func(ctx context.Context, cfg Config) (Driver, error)

// ScopeChecker is implemented by drivers that can tell whether their scope
// (network, project, directory) still exists. sandbox_backend's Read uses it
// so that a scope deleted outside Terraform is planned for creation again.
type ScopeChecker interface {
	ScopeExists(ctx context.Context) (bool, error)
}
