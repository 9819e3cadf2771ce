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
		fmt.Errorf("delete network: %w", driver.ErrInUse):                           "carry the label sandbox.backend=gpu",
		driver.WithAdvice(fmt.Errorf("engine bug"), "Restart the engine."):          "Restart the engine.",
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

// An error carrying the driver's own advice gets that advice alone, not the
// generic one of its sentinel as well.
func TestDriverAdviceReplacesTheGenericOne(t *testing.T) {
	cfg := driver.Config{Driver: driver.Docker, Name: "gpu", Docker: &driver.DockerConfig{Host: "unix:///var/run/docker.sock"}}
	err := driver.WithAdvice(fmt.Errorf("stale endpoint: %w", driver.ErrInUse), "Restart dockerd.")
	d := driverError(summary("Delete", "Sandbox Backend"), cfg, "deleting the backend's scope", err)
	if !strings.HasSuffix(d.Detail(), "Restart dockerd.") || strings.Contains(d.Detail(), "carry the label") {
		t.Fatalf("detail:\n%s", d.Detail())
	}
	if driver.WithAdvice(nil, "x") != nil {
		t.Fatal("WithAdvice(nil) is not nil")
	}
}
