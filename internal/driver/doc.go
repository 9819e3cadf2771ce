// Package driver defines the small, engine-neutral interface that every
// backend (docker, incus, local, kubernetes) implements, and the plain Go types
// it speaks. Nothing here imports terraform-plugin-* or any engine client: the
// provider translates Terraform values into these types, and each driver
// translates them into its engine's API.
//
// Drivers report "does not exist" as ErrNotFound (wrapped with %w and context)
// so the provider can remove an object from state on Read and treat Delete as
// done, whatever the engine.
package driver
