# <backend-import-id>/<instance-name>
terraform import 'sandbox_instance.worker[0]' 'docker:evals:unix:///var/run/docker.sock/worker-0'
terraform import sandbox_instance.dev 'local:dev/worker-0'
# The backend part is sandbox_backend's import ID (its `id`); the instance name
# comes after the last '/'. The engine reports the image, type, labels, ports and
# whether it runs; settings it does not report (command, env, limits, files,
# volumes, lifetime, security) are taken from the configuration on the next apply,
# which may plan a replacement if they differ from the defaults.
