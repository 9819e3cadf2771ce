# Built on the backend's engine from a local context; any change to a file
# in the context plans a replacement (source_hash).
resource "sandbox_image" "python" {
  backend = sandbox_backend.docker.handle
  name    = "evals/python:3.12"
  build = {
    context    = "${path.module}/img"
    dockerfile = "Dockerfile"
    args       = { PYTHON_VERSION = "3.12" }
  }
}

# Pulled from a registry the engine can reach.
resource "sandbox_image" "slim" {
  backend = sandbox_backend.docker.handle
  name    = "python:3.12-slim"
  pull    = { ref = "python:3.12-slim" }
  keep    = true # leave it on the engine at destroy
}

# A rootfs tarball: imported by Docker and Incus, unpacked by the local backend.
resource "sandbox_image" "busybox" {
  backend = sandbox_backend.local.handle
  name    = "busybox"
  archive = { path = "${path.module}/busybox-rootfs.tar.gz" }
}
