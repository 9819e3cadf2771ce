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
# (or just `python`: commands run with the venv first on PATH). Runs after the
# web initializer of the same sandbox.
resource "sandbox_initializer" "python" {
  instance   = sandbox_instance.worker[0].handle
  kind       = "python"
  settings   = { packages = "requests==2.32.3" }
  commands   = [["python", "-c", "import requests; print(requests.__version__)"]]
  depends_on = [sandbox_initializer.web]
}

# Neo4j in a sandbox running an image built on the official neo4j image:
# secrets go in sensitive_settings, kept out of plans and masked in results.
variable "neo4j_password" {
  type      = string
  sensitive = true
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
