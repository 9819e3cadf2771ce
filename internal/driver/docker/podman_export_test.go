package docker

// PodmanError is podmanError, for the Podman tests of package docker_test.
var PodmanError = podmanError
