# <backend import ID>/<volume name>
terraform import sandbox_volume.dataset 'docker:evals:unix:///var/run/docker.sock/dataset'
