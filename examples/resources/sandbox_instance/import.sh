# <backend-import-id>/<instance-name>
terraform import 'sandbox_instance.worker[0]' 'docker:evals:unix:///var/run/docker.sock/worker-0'
terraform import sandbox_instance.dev 'local:dev/worker-0'
# The backend part is sandbox_backend's import ID (its `id`); the instance name
# (the user's name, not engine_name) comes after the last '/'. What each backend
# reads back is listed under "Import" above; the rest is taken from the
# configuration on the next apply, which plans a replacement where it differs.
