# <backend import ID>#<image name> (image names contain '/' and ':', hence '#')
terraform import sandbox_image.python 'docker:evals:unix:///var/run/docker.sock#evals/python:3.12'
terraform import sandbox_image.busybox 'local:dev#busybox'
