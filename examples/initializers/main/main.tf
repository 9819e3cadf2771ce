# Kind "main": the agent's workspace. As root it creates /workspace, writes
# the initializer's env to /workspace/.env and gives both to `owner`; the
# commands then run in /workspace.
#
# Image: the Debian fixture, built offline by `scripts/fixtures.sh debian`
# (debootstrap bookworm with python3, python3-venv and gdb, imported into the
# local Docker engine as sandbox-fixture/debian:bookworm). Any image with
# mkdir, chmod and chown works.

terraform {
  required_providers {
    sandbox = { source = "sandboxfleet/sandbox" }
  }
}

resource "sandbox_backend" "docker" {
  name   = "init-main"
  docker = {}
}

resource "sandbox_instance" "agent" {
  backend = sandbox_backend.docker.handle
  image   = "sandbox-fixture/debian:bookworm"
  name    = "agent"
  command = ["sleep", "infinity"]
}

resource "sandbox_initializer" "workspace" {
  instance = sandbox_instance.agent.handle
  kind     = "main"
  settings = { workspace = "/workspace", owner = "nobody", mode = "0750" }
  env      = { TASK = "summarise the repository", MODEL = "small" }
  files    = [{ path = "/workspace/task.md", content = "# Task\n" }]
  commands = [["sh", "-c", "pwd; ls -la; cat .env"]]
}

output "workspace" {
  value = sandbox_initializer.workspace.results[length(sandbox_initializer.workspace.results) - 1].stdout
}
