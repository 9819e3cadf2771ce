# A named volume seeded from a local directory, mounted read-only below.
resource "sandbox_volume" "dataset" {
  backend = sandbox_backend.docker.handle
  name    = "dataset"
  source  = "${path.module}/data"
}

resource "sandbox_instance" "reader" {
  backend = sandbox_backend.docker.handle
  image   = sandbox_image.python.image_id
  command = ["sleep", "infinity"]
  volumes = [{ volume = sandbox_volume.dataset.name, target = "/data", read_only = true }]
}
