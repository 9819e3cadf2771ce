# A fleet spread over Docker hosts: the local engine, plus any number of
# remote hosts reached over SSH (var.ssh_hosts). Each host gets the image,
# built there from ./img, and var.per_host sandboxes serving HTTP.

terraform {
  required_providers {
    sandbox = {
      source = "sandboxfleet/sandbox"
    }
  }
}

provider "sandbox" {
  labels = {
    example = "docker-fleet"
  }
}

variable "base_image" {
  description = "Base of the sandbox image (needs python3). Offline: sandbox-fixture/debian:bookworm from scripts/fixtures.sh."
  type        = string
  default     = "python:3.12-slim"
}

variable "per_host" {
  description = "Sandboxes per Docker host."
  type        = number
  default     = 2
}

variable "ssh_hosts" {
  description = "Remote Docker hosts: backend name => ssh://user@host:port. Host keys are checked against ~/.ssh/known_hosts."
  type        = map(string)
  default     = {}
}

variable "known_hosts_file" {
  description = "known_hosts file for the SSH hosts (null: ~/.ssh/known_hosts)."
  type        = string
  default     = null
}

variable "ssh_key_file" {
  description = "Private key for the SSH hosts (null: ssh-agent, then the provider's ssh_private_key)."
  type        = string
  default     = null
}

resource "sandbox_backend" "local" {
  name   = "fleet"
  docker = {}
}

resource "sandbox_backend" "remote" {
  for_each = var.ssh_hosts
  name     = each.key
  docker = {
    host             = each.value
    known_hosts_file = var.known_hosts_file
    ssh_key_file     = var.ssh_key_file
    # Published ports are reached at the host's name (advertise_host), on
    # ports the engine picks (port_strategy "dynamic", the remote default).
    # internal = true would cut egress, but Docker publishes no ports then.
  }
}

locals {
  backends = merge(
    { fleet = sandbox_backend.local.handle },
    { for name, b in sandbox_backend.remote : name => b.handle },
  )
  # One entry per sandbox: "<backend>-<n>" => { backend, n }.
  sandboxes = {
    for pair in setproduct(keys(local.backends), range(var.per_host)) :
    "${pair[0]}-${pair[1]}" => { backend = pair[0], n = pair[1] }
  }
}

resource "sandbox_image" "app" {
  for_each = local.backends
  backend  = each.value
  name     = "fleet/app:1"
  build = {
    context = "${path.module}/img"
    args    = { BASE = var.base_image }
  }
}

resource "sandbox_instance" "worker" {
  for_each = local.sandboxes
  backend  = local.backends[each.value.backend]
  image    = sandbox_image.app[each.value.backend].image_id
  name     = "worker-${each.value.n}"
  command  = ["python3", "-m", "http.server", "8080", "--directory", "/workspace"]
  user     = "1000:1000"
  labels   = { role = "web" }

  cpus       = 0.5
  memory     = "128MiB"
  pids_limit = 64
  lifetime   = "2h"

  network = "isolated"
  ports   = [{ name = "http", port = 8080 }]
  files = [
    { path = "/workspace/whoami.txt", content = "${each.key}\n" },
  ]
}

# Wait until each server answers inside its sandbox (commands run in order and
# fail the apply with their exit code and stderr).
resource "sandbox_initializer" "ready" {
  for_each = sandbox_instance.worker
  instance = each.value.handle
  commands = [[
    "python3", "-c", <<-EOT
      import time, urllib.request
      for _ in range(100):
          try:
              print(urllib.request.urlopen("http://127.0.0.1:8080/whoami.txt", timeout=2).read().decode().strip())
              break
          except OSError:
              time.sleep(0.1)
      else:
          raise SystemExit("the server did not answer")
    EOT
  ]]
}
