// Package docker implements driver.Driver on the Docker Engine API (and
// API-compatible engines such as Podman), over a unix socket, TCP with TLS,
// or SSH to a remote socket (transport.go). The API version is negotiated,
// so Debian's Docker 20.10 (API 1.41) works with the v28 client.
//
// Engine objects:
//   - network  sandbox-<backend>: a labelled user-defined bridge (internal
//     when the backend says so); instances on it reach each other by name.
//   - container and volume <backend>-<name>, labelled with driver.ObjectLabels
//     plus sandbox.name, and for containers sandbox.ports, sandbox.loopback-ip
//     and sandbox.expires-at, so ListInstances rebuilds everything from one
//     label-filtered list call.
//   - images keep the user's tag.
//
// The sandbox agent (internal/agent) is PID 1 when an init or a lifetime is
// wanted: it reaps zombies and stops the instance at its deadline without
// Terraform running (exit 124, reported as expired). On a local engine the
// host binary is bind-mounted read-only; on a remote one it is copied once
// into a volume named after its hash. Without a usable agent, Docker's own
// init is used and lifetimes are refused.
//
// Copying into volumes needs a container, and no registry may be reachable,
// so the driver builds a one-file image FROM scratch (sandbox-seed:v1) and
// copies through a container of it that is created but never started.
package docker
