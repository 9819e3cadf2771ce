# Quickstart: a fleet of three sandboxes on the daemonless local backend.
# Nothing to install but bubblewrap; `make demo` applies, prints and destroys it.

terraform {
  required_providers {
    sandbox = {
      source = "sandboxfleet/sandbox"
    }
  }
}

provider "sandbox" {
  labels = {
    example = "quickstart"
  }
}

variable "workers" {
  description = "How many sandboxes to run."
  type        = number
  default     = 3
}

# The local backend: each sandbox is a directory under the backend's root
# (default ~/.local/share/terraform-provider-sandbox/<name>) and its processes
# run in fresh bubblewrap namespaces: no network, their own PIDs and mounts.
resource "sandbox_backend" "local" {
  name = "quickstart"
  local = {
    isolation = "bwrap"
  }
}

resource "sandbox_instance" "worker" {
  count   = var.workers
  backend = sandbox_backend.local.handle

  # "host": the host's /usr, /bin, /lib and /etc, read-only; a rootfs tarball
  # imported with sandbox_image (archive) works the same way.
  image   = "host"
  name    = "worker-${count.index}"
  command = ["sleep", "infinity"]
  env     = { TASK = "task-${count.index}" }
  labels  = { role = "worker" }
  network = "none"

  memory     = "128MiB"
  pids_limit = 64
  lifetime   = "1h"

  files = [
    { path = "/workspace/task.json", content = jsonencode({ id = count.index, task = "task-${count.index}" }) },
  ]
}

# Run a command in every sandbox and keep its output and exit code.
resource "sandbox_initializer" "hello" {
  count    = var.workers
  instance = sandbox_instance.worker[count.index].handle
  commands = [
    ["sh", "-c", "echo \"$TASK in $(hostname): $(cat /workspace/task.json)\""],
  ]
}
