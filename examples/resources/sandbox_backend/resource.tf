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

# A host behind a bastion, its host key pinned instead of known_hosts (the
# plan otherwise records the key known_hosts trusts), an encrypted key whose
# passphrase comes from an environment variable, and ports reached at the
# host's private address.
resource "sandbox_backend" "private" {
  name = "private"
  docker = {
    host                   = "ssh://ubuntu@10.0.3.7"
    ssh_jump_host          = "ubuntu@bastion.example.com:22"
    ssh_key_file           = "~/.ssh/id_ed25519"
    ssh_key_passphrase_env = "SSH_KEY_PASSPHRASE"
    host_key_fingerprint   = "SHA256:mVPwvezndPv/ARoIadVY98vAC0g+P/5633yTC4d/wXE"
    advertise_host         = "10.0.3.7"
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
# bubblewrap namespaces, under a seccomp filter close to Docker's default.
# It isolates less than Docker (no user namespace as root, no disk limit):
# see "Local (bubblewrap)" above.
resource "sandbox_backend" "local" {
  name = "dev"
  local = {
    isolation = "bwrap"
  }
}

output "docker_capabilities" {
  value = sandbox_backend.docker.capabilities
}
