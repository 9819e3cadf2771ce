# The local Docker Engine (DOCKER_HOST, else /var/run/docker.sock).
resource "sandbox_backend" "docker" {
  name   = "evals"
  docker = {}
}

# A remote Docker host over SSH: no docker CLI and no ssh binary needed, the
# host key is always verified.
resource "sandbox_backend" "gpu" {
  name = "gpu"
  docker = {
    host             = "ssh://ubuntu@gpu-1.example.com:22"
    ssh_key_file     = "~/.ssh/id_ed25519"
    known_hosts_file = "~/.ssh/known_hosts"
    port_strategy    = "dynamic"
    internal         = true # the sandboxes' network has no egress
  }
}

# A remote Docker host over TCP with mutual TLS.
resource "sandbox_backend" "tls" {
  name = "ci"
  docker = {
    host          = "tcp://docker-1.example.com:2376"
    tls_ca_file   = "${path.module}/certs/ca.pem"
    tls_cert_file = "${path.module}/certs/cert.pem"
    tls_key_file  = "${path.module}/certs/key.pem"
  }
}

# Incus on this machine: its own project scopes the backend.
resource "sandbox_backend" "incus" {
  name = "vms"
  incus = {
    project = "sandbox-vms"
  }
}

# Daemonless: every sandbox is a directory and its processes run in fresh
# bubblewrap namespaces.
resource "sandbox_backend" "local" {
  name = "dev"
  local = {
    isolation = "bwrap"
  }
}

output "docker_capabilities" {
  value = sandbox_backend.docker.capabilities
}
