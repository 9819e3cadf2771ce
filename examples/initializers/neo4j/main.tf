# Kind "neo4j": Neo4j 5 started by the official image's entrypoint, configured
# through its NEO4J_* environment, ready when GET / on the HTTP port answers
# 200 (default timeout 3m).
#
# NEEDS A REGISTRY: the image is pulled from Docker Hub (neo4j:5). On a host
# without one, `docker load` the image first and use `image = "neo4j:5"`.

terraform {
  required_providers {
    sandbox = { source = "sandboxfleet/sandbox" }
  }
}

variable "neo4j_password" {
  description = "Initial password of the neo4j user (8 characters or more)."
  type        = string
  sensitive   = true
}

resource "sandbox_backend" "docker" {
  name   = "init-neo4j"
  docker = {}
}

resource "sandbox_image" "neo4j" {
  backend = sandbox_backend.docker.handle
  name    = "neo4j:5"
  pull    = { ref = "neo4j:5" }
  keep    = true
}

resource "sandbox_instance" "graph" {
  backend = sandbox_backend.docker.handle
  image   = sandbox_image.neo4j.image_id
  name    = "graph"
  command = ["sleep", "infinity"] # the initializer starts Neo4j itself
  memory  = "2GiB"
  ports = [
    { name = "http", port = 7474 },
    { name = "bolt", port = 7687 },
  ]
}

resource "sandbox_initializer" "neo4j" {
  instance           = sandbox_instance.graph.handle
  kind               = "neo4j"
  settings           = { heap = "512m", pagecache = "256m" }
  sensitive_settings = { password = var.neo4j_password } # masked in results and errors
}

output "neo4j_browser" {
  value = "http://${sandbox_instance.graph.endpoints["http"]}"
}

output "bolt" {
  value = "bolt://${sandbox_instance.graph.endpoints["bolt"]}"
}
