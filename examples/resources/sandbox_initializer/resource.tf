resource "sandbox_backend" "docker" {
  name   = "init-demo"
  docker = {}
}

resource "sandbox_image" "busybox" {
  backend = sandbox_backend.docker.handle
  name    = "init-demo/busybox:1"
  pull    = { ref = "busybox:1.36" }
}

resource "sandbox_instance" "worker" {
  count   = 1
  backend = sandbox_backend.docker.handle
  image   = sandbox_image.busybox.image_id
  name    = "worker-${count.index}"
  command = ["sleep", "infinity"]
  ports   = [{ name = "http", port = 8080 }]
}

# Files, then commands in order; then a service started detached and probed
# inside the sandbox until it answers. A failing command fails the apply with
# its exit code and the end of its stderr; every command's output is kept in
# `results`.
resource "sandbox_initializer" "web" {
  instance = sandbox_instance.worker[0].handle
  kind     = "custom"

  files    = [{ path = "/srv/index.html", content = "ok" }]
  commands = [["sh", "-c", "echo ready > /tmp/state"]]
  env      = { GREETING = "hello" }

  service = {
    command = ["httpd", "-f", "-p", "8080", "-h", "/srv"]
    ready   = { http = { port = 8080, path = "/index.html", status = 200 } } # or tcp_port = 8080, or command = [...]
    timeout = "60s"
  }

  on_destroy = [["sh", "-c", "echo bye"]]
  triggers   = { version = "1" } # a change re-runs it
}

# A Python virtual environment under /app/.venv, used as /app/.venv/bin/python
# (or just `python`: commands run with the venv first on PATH), in a sandbox
# running a Python image. Runs after the web initializer.
resource "sandbox_image" "python" {
  backend = sandbox_backend.docker.handle
  name    = "init-demo/python:3.12"
  pull    = { ref = "python:3.12-slim" }
}

resource "sandbox_instance" "python" {
  backend = sandbox_backend.docker.handle
  image   = sandbox_image.python.image_id
  name    = "python"
  command = ["sleep", "infinity"]
}

resource "sandbox_initializer" "python" {
  instance   = sandbox_instance.python.handle
  kind       = "python"
  settings   = { packages = "requests==2.32.3" }
  commands   = [["python", "-c", "import requests; print(requests.__version__)"]]
  depends_on = [sandbox_initializer.web]
}

# Neo4j in a sandbox running the official neo4j image. The password goes in
# sensitive_settings: kept out of plans and masked in results, but stored in
# the state like every attribute, so protect the state.
variable "neo4j_password" {
  type      = string
  sensitive = true
}

resource "sandbox_image" "neo4j" {
  backend = sandbox_backend.docker.handle
  name    = "init-demo/neo4j:5"
  pull    = { ref = "neo4j:5" }
}

resource "sandbox_instance" "graph" {
  backend = sandbox_backend.docker.handle
  image   = sandbox_image.neo4j.image_id
  name    = "graph"
  memory  = "1GiB"
  ports   = [{ name = "bolt", port = 7687 }]
}

resource "sandbox_initializer" "graph" {
  instance           = sandbox_instance.graph.handle
  kind               = "neo4j"
  settings           = { heap = "512m" }
  sensitive_settings = { password = var.neo4j_password }
}

output "web_ready_at" {
  value = sandbox_initializer.web.ready_at
}
