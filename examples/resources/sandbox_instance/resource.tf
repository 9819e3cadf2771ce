resource "sandbox_backend" "docker" {
  name   = "demo"
  docker = {}
}

resource "sandbox_image" "python" {
  backend = sandbox_backend.docker.handle
  name    = "demo/python:3.12"
  pull    = { ref = "python:3.12-slim" }
}

# Three workers with the safe defaults for untrusted code (no new privileges,
# dropped capabilities, an init process, a pids limit) plus explicit limits.
resource "sandbox_instance" "worker" {
  count   = 3
  backend = sandbox_backend.docker.handle
  image   = sandbox_image.python.image_id
  name    = "worker-${count.index}"
  command = ["python3", "-m", "http.server", "8080"]
  env     = { TASK = "demo" }
  workdir = "/workspace"
  user    = "1000:1000"
  labels  = { role = "worker" }

  cpus       = 0.5
  memory     = "256MiB"
  pids_limit = 128
  network    = "isolated"
  ports      = [{ name = "http", port = 8080 }]
  files = [
    { path = "/workspace/task.json", content = jsonencode({ id = count.index }), mode = "0644" },
  ]

  running  = true
  lifetime = "2h" # stopped by the engine side after this, even with no Terraform running
}

output "endpoints" {
  value = { for w in sandbox_instance.worker : w.name => w.endpoints["http"] }
}
