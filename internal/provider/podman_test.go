package provider_test

// Acceptance tests of Podman's Docker-compatible API as a docker backend
// (scripts/setup-podman.sh), through the real terraform binary: locally on
// the service's socket, and over SSH to that socket. Gate: SANDBOX_ACC_PODMAN
// (plus SANDBOX_ACC_SSH for the SSH test).

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// podmanStackHCL: a backend on Podman, a busybox image built there and an
// httpd instance with a published port and limits.
func podmanStackHCL(e remoteEnv, limits string) string {
	return e.backendHCL("test") + fmt.Sprintf(`
resource "sandbox_image" "test" {
  backend = sandbox_backend.test.handle
  name    = %q
  build   = { context = %q }
}

resource "sandbox_instance" "test" {
  backend = sandbox_backend.test.handle
  image   = sandbox_image.test.image_id
  name    = "web"
  command = ["sh", "-c", "mkdir -p /www && echo podman-ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
  ports   = [{ name = "http", port = 8080 }]
  %s
}
`, e.image(), e.context, limits)
}

// cgroupLimits prints the memory and pids limits a sandbox sees (cgroup v2,
// else v1).
const cgroupLimits = "echo $(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes) " +
	"$(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max)"

func TestAccPodman_basic(t *testing.T) {
	acctest.PreCheckPodman(t)
	e := newRemoteEnv(t, acctest.PodmanDriverConfig(acctest.RandomName("tf-acc")))
	backendID := acctest.DockerImportID(e.cfg)
	sameID := statecheck.CompareValue(compare.ValuesSame())
	before := "memory = \"128MiB\"\n  pids_limit = 100"
	after := "memory = \"96MiB\"\n  pids_limit = 64"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.ComposeChecks(acctest.CheckImageGone(e.cfg, e.image()), acctest.CheckNoManagedObjects(e.cfg)),
		Steps: []resource.TestStep{
			{
				Config: podmanStackHCL(e, before),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sandbox_backend.test", tfjsonpath.New("engine_version"), knownvalue.StringRegexp(regexp.MustCompile(`^podman `))),
					statecheck.ExpectKnownValue("sandbox_backend.test", tfjsonpath.New("capabilities"), knownvalue.SetPartial([]knownvalue.Check{
						knownvalue.StringExact(driver.CapPorts), knownvalue.StringExact(driver.CapPidsLimit), knownvalue.StringExact(driver.CapMemoryLimit)})),
					// A local socket: one 127.0.0.x per sandbox.
					statecheck.ExpectKnownValue("sandbox_backend.test", handleField("port_strategy"), knownvalue.StringExact(driver.PortStrategyLoopbackIP)),
					statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("status"), knownvalue.StringExact(driver.StatusRunning)),
					statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("endpoints").AtMapKey("http"), knownvalue.StringRegexp(regexp.MustCompile(`^127\.\d+\.\d+\.\d+:8080$`))),
					sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
				},
				Check: acctest.ComposeChecks(checkServes(instanceAddr, "http", "podman-ok"),
					checkExec("134217728 100", "sh", "-c", cgroupLimits)),
			},
			{Config: podmanStackHCL(e, before), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
			// Limits change in place (libpod's update endpoint on Podman 4).
			{
				Config:            podmanStackHCL(e, after),
				ConfigPlanChecks:  expectAction(plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{sameID.AddStateValue(instanceAddr, tfjsonpath.New("id"))},
				Check:             checkExec("100663296 64", "sh", "-c", cgroupLimits),
			},
			// Stopped: Podman changes the limits of running containers only.
			{
				Config:            podmanStackHCL(e, after+"\n  running = false"),
				ConfigPlanChecks:  expectAction(plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusStopped)},
			},
			{
				Config:      podmanStackHCL(e, "memory = \"80MiB\"\n  pids_limit = 48\n  running = false"),
				ExpectError: regexp.MustCompile(`running container only`),
			},
			// Started in the same apply: the limits change after the start.
			{
				Config:            podmanStackHCL(e, "memory = \"80MiB\"\n  pids_limit = 48"),
				ConfigPlanChecks:  expectAction(plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning), sameID.AddStateValue(instanceAddr, tfjsonpath.New("id"))},
				Check:             checkExec("83886080 48", "sh", "-c", cgroupLimits),
			},
			{ResourceName: "sandbox_backend.test", ImportState: true, ImportStateId: backendID, ImportStateVerify: true},
			{ResourceName: "sandbox_image.test", ImportState: true, ImportStateId: backendID + "#" + e.image(), ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"build", "archive", "labels"}},
			// Limits are not read back from the engine (as on Docker).
			{ResourceName: instanceAddr, ImportState: true, ImportStateId: backendID + "/web", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"command", "env", "timeouts", "memory", "pids_limit"}},
		},
	})
}

// TestAccPodman_ssh: the whole remote stack (image build from an uploaded
// context, seeded volume, instance with a port, imports) on Podman over SSH.
func TestAccPodman_ssh(t *testing.T) {
	acctest.PreCheckPodman(t)
	acctest.PreCheckSSH(t)
	acctest.CleanPodmanCachesOnCleanup(t) // the agent volume an ssh:// backend fills
	e := newRemoteEnv(t, acctest.PodmanSSHDriverConfig(acctest.RandomName("tf-acc")))
	testAccRemoteStack(t, e, statecheck.ExpectKnownValue("sandbox_backend.test", tfjsonpath.New("engine_version"),
		knownvalue.StringRegexp(regexp.MustCompile(`^podman `))))
}

// TestAccPodman_refusedAtPlan: a limit the engine reports it cannot enforce
// (here `disk`: Podman's overlay storage on ext4 has no quota) fails the
// plan, at the attribute, before anything is created.
func TestAccPodman_refusedAtPlan(t *testing.T) {
	acctest.PreCheckPodman(t)
	e := newRemoteEnv(t, acctest.PodmanDriverConfig(acctest.RandomName("tf-acc")))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.CheckNoManagedObjects(e.cfg),
		Steps: []resource.TestStep{{
			Config:      podmanStackHCL(e, `disk = "1GiB"`),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Limit Not Supported by This Engine.*podman .*disk_limit`),
		}},
	})
}
