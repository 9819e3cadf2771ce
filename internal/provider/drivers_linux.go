//go:build linux

package provider

// The local driver (bubblewrap or plain processes) uses Linux-only syscalls.
import (
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/local"
)
