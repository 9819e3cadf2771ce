package acctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// CheckDestroy helpers ask the engine, never Terraform's state.

// CheckNoManagedObjects fails if the backend's scope or any of its
// instances still exists on the engine.
func CheckNoManagedObjects(cfg driver.Config) resource.TestCheckFunc {
	return func(*terraform.State) error {
		exists, err := ScopeExists(cfg)
		if err != nil {
			return err
		}
		if !exists {
			return nil // no scope, nothing in it
		}
		d, err := driver.Open(context.Background(), DirectConfig(cfg))
		if err != nil {
			return err
		}
		defer d.Close()
		insts, err := d.ListInstances(context.Background())
		if err != nil {
			return fmt.Errorf("%s backend %q: list instances: %w", cfg.Driver, cfg.Name, err)
		}
		if len(insts) > 0 {
			return fmt.Errorf("%s backend %q: %d instances left (first %q)", cfg.Driver, cfg.Name, len(insts), insts[0].Name)
		}
		return fmt.Errorf("%s backend %q: its scope still exists on the engine", cfg.Driver, cfg.Name)
	}
}

// CheckImageGone fails if the image name still exists on the backend.
func CheckImageGone(cfg driver.Config, name string) resource.TestCheckFunc {
	return checkGone(cfg, "image", name, func(ctx context.Context, d driver.Driver) error {
		_, err := d.InspectImage(ctx, name)
		return err
	})
}

// CheckVolumeGone fails if the volume still exists on the backend.
func CheckVolumeGone(cfg driver.Config, name string) resource.TestCheckFunc {
	return checkGone(cfg, "volume", name, func(ctx context.Context, d driver.Driver) error {
		_, err := d.InspectVolume(ctx, name)
		return err
	})
}

func checkGone(cfg driver.Config, kind, name string, inspect func(context.Context, driver.Driver) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		d, err := driver.Open(context.Background(), DirectConfig(cfg))
		if err != nil {
			return err
		}
		defer d.Close()
		err = inspect(context.Background(), d)
		switch {
		case err == nil:
			return fmt.Errorf("%s backend %q: %s %q still exists", cfg.Driver, cfg.Name, kind, name)
		case driver.IsNotFound(err):
			return nil
		}
		return fmt.Errorf("%s backend %q: inspect %s %q: %w", cfg.Driver, cfg.Name, kind, name, err)
	}
}

// ComposeChecks runs every check and joins their errors.
func ComposeChecks(checks ...resource.TestCheckFunc) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		var errs []error
		for _, c := range checks {
			errs = append(errs, c(s))
		}
		return errors.Join(errs...)
	}
}

// ScopeExists asks the engine whether the backend's scope (docker network
// sandbox-<name>, local directory <root>/<name>, incus project) exists.
func ScopeExists(cfg driver.Config) (bool, error) {
	switch cfg.Driver {
	case driver.Docker:
		return cliExists("docker", append(dockerCLI(cfg), "network", "inspect", "sandbox-"+cfg.Name)...)
	case driver.Local:
		_, err := os.Stat(filepath.Join(cfg.Local.Root, cfg.Name))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	case driver.Incus:
		return cliExists("incus", "project", "show", cfg.Incus.Project)
	}
	return false, fmt.Errorf("ScopeExists: driver %q not supported", cfg.Driver)
}

// cliExists runs an inspect command: exit 0 = exists, "not found" = gone.
func cliExists(name string, args ...string) (bool, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err == nil {
		return true, nil
	}
	if s := strings.ToLower(string(out)); strings.Contains(s, "not found") || strings.Contains(s, "no such") {
		return false, nil
	}
	return false, fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
}

// DeleteScopeOutside removes the backend's scope behind Terraform's back,
// for "deleted outside Terraform" steps (use it in PreConfig).
func DeleteScopeOutside(t *testing.T, cfg driver.Config) {
	t.Helper()
	var err error
	switch cfg.Driver {
	case driver.Docker:
		var out []byte
		if out, err = exec.Command("docker", append(dockerCLI(cfg), "network", "rm", "sandbox-"+cfg.Name)...).CombinedOutput(); err != nil {
			err = fmt.Errorf("%v: %s", err, out)
		}
	case driver.Local:
		err = os.RemoveAll(filepath.Join(cfg.Local.Root, cfg.Name))
	default:
		err = fmt.Errorf("driver %q not supported", cfg.Driver)
	}
	if err != nil {
		t.Fatalf("deleting the scope of %s backend %q outside Terraform: %v", cfg.Driver, cfg.Name, err)
	}
}
