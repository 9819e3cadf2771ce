# Kind "joern": the Joern query server (`joern --server`), ready when its port
# accepts connections (default timeout 5m: the JVM starts slowly). Queries are
# POSTed to /query-sync.
#
# NEEDS A REGISTRY: the image is pulled from ghcr.io (joernio/joern). Pick a
# release tag; on a host without a registry, `docker load` it first and use
# `image = "<its tag>"`. If `joern` is not on the image's PATH, set
# settings.binary to its full path.

terraform {
  required_providers {
    sandbox = { source = "sandboxfleet/sandbox" }
  }
}

variable "joern_password" {
  description = "Basic-auth password of the query server."
  type        = string
  sensitive   = true
}

resource "sandbox_backend" "docker" {
  name   = "init-joern"
  docker = {}
}

resource "sandbox_image" "joern" {
  backend = sandbox_backend.docker.handle
  name    = "ghcr.io/joernio/joern:nightly"
  pull    = { ref = "ghcr.io/joernio/joern:nightly" }
  keep    = true
}

resource "sandbox_instance" "analysis" {
  backend = sandbox_backend.docker.handle
  image   = sandbox_image.joern.image_id
  name    = "analysis"
  command = ["sleep", "infinity"]
  memory  = "6GiB"
  ports   = [{ name = "joern", port = 8080 }]
  files   = [{ path = "/src/hello.c", content = "int main(void) { return 0; }\n" }]
}

resource "sandbox_initializer" "joern" {
  instance           = sandbox_instance.analysis.handle
  kind               = "joern"
  settings           = { port = "8080", heap = "4g", username = "joern" }
  sensitive_settings = { password = var.joern_password }
}

output "joern_server" {
  value = "http://${sandbox_instance.analysis.endpoints["joern"]}/query-sync"
}
