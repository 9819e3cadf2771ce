# <backend-import-id>/<image-name>
terraform import sandbox_image.python 'docker:evals:unix:///var/run/docker.sock/evals/python:3.12'
