package provider

// The drivers compiled into the provider. Each registers itself with
// internal/driver from its init function; the provider reaches them only
// through driver.Pool.
import (
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/docker"
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/incus"
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/local"
)
