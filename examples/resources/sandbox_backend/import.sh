# <driver>:<name>[:<endpoint>][?<field>=<value>&...]
# The endpoint is the docker host, the incus address or the local root.
terraform import sandbox_backend.docker 'docker:evals:unix:///var/run/docker.sock'
terraform import sandbox_backend.gpu 'docker:gpu:ssh://ubuntu@gpu-1.example.com:22?ssh_key_file=/home/me/.ssh/id_ed25519&known_hosts_file=/home/me/.ssh/known_hosts&port_strategy=dynamic&internal=true'
terraform import sandbox_backend.local 'local:dev'
