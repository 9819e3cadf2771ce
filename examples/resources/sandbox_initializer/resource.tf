# Files, then commands in order; then a service started detached and probed
# until it answers. A failing command fails the apply with its exit code and
# the tail of its stderr.
resource "sandbox_initializer" "web" {
  instance = sandbox_instance.worker[0].handle
  kind     = "custom"

  files    = [{ path = "/srv/index.html", content = "ok" }]
  commands = [["sh", "-c", "echo ready > /tmp/state"]]
  env      = { GREETING = "hello" }

  service = {
    command = ["httpd", "-f", "-p", "8080", "-h", "/srv"]
    ready   = { tcp_port = 8080 }
    timeout = "60s"
  }

  on_destroy = [["sh", "-c", "echo bye"]]
  triggers   = { version = "1" } # a change re-runs it
}

# A Python virtual environment under /app/.venv, used as /app/.venv/bin/python.
resource "sandbox_initializer" "python" {
  instance = sandbox_instance.worker[1].handle
  kind     = "python"
  settings = { packages = "requests" }
}

output "web_ready_at" {
  value = sandbox_initializer.web.ready_at
}
