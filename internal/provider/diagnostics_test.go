package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func TestDriverErrorNamesBackendObjectCauseAndAdvice(t *testing.T) {
	cfg := driver.Config{Driver: driver.Docker, Name: "gpu", Docker: &driver.DockerConfig{Host: "ssh://ubuntu@gpu-1:22"}}
	cases := map[error]string{
		fmt.Errorf("dial: %w", driver.ErrUnavailable):                               "running and reachable at ssh://ubuntu@gpu-1:22",
		fmt.Errorf("tag taken: %w", driver.ErrAlreadyExists):                        "terraform import",
		fmt.Errorf("vm: %w", driver.ErrUnsupported):                                 "capabilities",
		fmt.Errorf("gone: %w", driver.ErrNotFound):                                  "does not exist",
		fmt.Errorf("disk full"):                                                     "engine's logs",
		fmt.Errorf("archive x: not a tar archive: %w", driver.ErrInvalid):           "an `archive` that is a tar file",
		fmt.Errorf("command \"x\": no such executable file: %w", driver.ErrInvalid): "a `command` that exists",
		fmt.Errorf("dial tcp 127.0.0.1:2222: connect: connection refused"):          "running and reachable",
		fmt.Errorf("instance: no such image: busybox:nope: %w", driver.ErrNotFound): "Fix `image`",
	}
	for err, advice := range cases {
		d := driverError(summary("Create", "Sandbox Image"), cfg, `making image "x"`, err)
		if d.Summary() != "Unable to Create Sandbox Image" {
			t.Errorf("summary %q", d.Summary())
		}
		for _, want := range []string{`docker backend "gpu"`, "ssh://ubuntu@gpu-1:22", `making image "x"`, err.Error(), advice} {
			if !strings.Contains(d.Detail(), want) {
				t.Errorf("detail for %v lacks %q:\n%s", err, want, d.Detail())
			}
		}
	}
}
