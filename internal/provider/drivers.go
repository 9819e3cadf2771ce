package provider

// The drivers compiled into the provider. Each registers itself with
// internal/driver from its init function; the provider reaches them only
// through driver.Pool. The local driver needs Linux (bubblewrap, Linux-only
// syscalls) and is registered from drivers_linux.go; elsewhere a `local`
// backend fails at plan time (see localDriverUnavailable).
import (
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/docker"
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/incus"
)
