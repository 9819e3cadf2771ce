# Kind "python": a virtual environment under /app/.venv made with the image's
# own python3, `packages` installed into it with its pip, and the commands and
# service run with the venv first on PATH (so `python` is /app/.venv/bin/python).
#
# Image: the Debian fixture from `scripts/fixtures.sh debian` (python3 and
# python3-venv). Installing from PyPI needs egress: the default `isolated`
# network of a Docker backend has it unless the backend sets internal = true.
# Without a package index, install local wheels copied in with `files`.

terraform {
  required_providers {
    sandbox = { source = "sandboxfleet/sandbox" }
  }
}

variable "packages" {
  description = "Requirement specifiers for pip, e.g. \"requests==2.32.3\"; empty for none."
  type        = string
  default     = ""
}

resource "sandbox_backend" "docker" {
  name   = "init-python"
  docker = {}
}

resource "sandbox_instance" "py" {
  backend = sandbox_backend.docker.handle
  image   = "sandbox-fixture/debian:bookworm"
  name    = "py"
  command = ["sleep", "infinity"]
}

resource "sandbox_initializer" "venv" {
  instance = sandbox_instance.py.handle
  kind     = "python"
  settings = var.packages == "" ? {} : { packages = var.packages }
  commands = [
    ["python", "-c", "import sys; print(sys.prefix)"],
    ["pip", "list", "--format=freeze"],
  ]
}

output "python_prefix" {
  value = trimspace(sandbox_initializer.venv.results[length(sandbox_initializer.venv.results) - 2].stdout)
}
