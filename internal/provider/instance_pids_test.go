package provider_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// TestAccInstance_pidsLimitDefault: a container without pids_limit gets
// driver.DefaultPidsLimit on the engine while the attribute stays null (an
// empty re-plan, a consistent import); `pids_limit = 0` lifts it in place
// and a number sets it in place.
func TestAccInstance_pidsLimitDefault(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		cfg := func(extra string) string { return e.config(backendOpts{}, sleepCmd+extra) }
		sameID := statecheck.CompareValue(compare.ValuesSame())
		step := func(extra string, action plancheck.ResourceActionType, pids knownvalue.Check, want string) resource.TestStep {
			return resource.TestStep{
				Config:           cfg(extra),
				ConfigPlanChecks: expectAction(action),
				ConfigStateChecks: []statecheck.StateCheck{
					expectStatus(driver.StatusRunning),
					statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("pids_limit"), pids),
					sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
				},
				Check: checkEnginePidsLimit(want),
			}
		}
		runInstanceTest(t, e,
			step("", plancheck.ResourceActionCreate, knownvalue.Null(), strconv.Itoa(driver.DefaultPidsLimit)),
			resource.TestStep{Config: cfg(""), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
			resource.TestStep{
				ResourceName:            instanceAddr,
				ImportState:             true,
				ImportStateIdFunc:       importID(e.name),
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"command", "env", "timeouts"},
			},
			step("\n  pids_limit = 0", plancheck.ResourceActionUpdate, knownvalue.Int64Exact(0), "unlimited"),
			step("\n  pids_limit = 200", plancheck.ResourceActionUpdate, knownvalue.Int64Exact(200), "200"),
		)
	})
}

// checkEnginePidsLimit asks the engine for the instance's pids limit: docker
// inspect's HostConfig.PidsLimit, the local sandbox's cgroup pids.max.
// "unlimited" stands for no limit.
func checkEnginePidsLimit(want string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[instanceAddr]
		if !ok {
			return fmt.Errorf("%s not in state", instanceAddr)
		}
		cfg, err := engineConfig(rs.Primary.Attributes)
		if err != nil {
			return err
		}
		var got string
		switch cfg.Driver {
		case driver.Docker:
			out, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.PidsLimit}}", rs.Primary.ID).CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker inspect %s: %v: %s", rs.Primary.ID, err, out)
			}
			got = strings.TrimSpace(string(out))
			if n, err := strconv.ParseInt(got, 10, 64); got == "<nil>" || (err == nil && n <= 0) {
				got = "unlimited"
			}
		case driver.Local:
			got, err = localPidsMax(cfg, rs.Primary.Attributes["name"])
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("no pids check for the %s driver", cfg.Driver)
		}
		if got != want {
			return fmt.Errorf("%s backend %q: pids limit on the engine is %s, want %s", cfg.Driver, cfg.Name, got, want)
		}
		return nil
	}
}

// localPidsMax reads pids.max of a local sandbox's cgroup, found through
// its state.json (internal/driver/local/doc.go).
func localPidsMax(cfg driver.Config, name string) (string, error) {
	file := filepath.Join(cfg.Local.Root, cfg.Name, "instances", name, "state.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var st struct {
		Cgroups []string `json:"cgroups"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	for _, dir := range st.Cgroups {
		if v, err := os.ReadFile(filepath.Join(dir, "pids.max")); err == nil {
			if s := strings.TrimSpace(string(v)); s != "max" {
				return s, nil
			}
			return "unlimited", nil
		}
	}
	return "", fmt.Errorf("%s: no cgroup with pids.max among %v (the local pids limit needs root and the pids controller)", file, st.Cgroups)
}
