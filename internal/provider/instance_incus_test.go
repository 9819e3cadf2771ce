package provider_test

// sandbox_instance on Incus (SANDBOX_ACC_INCUS): the scenarios of
// instance_resource_test.go with the same configuration and only the
// backend changed, plus what is Incus-specific: system containers (no
// command), limits as Incus config keys, lifetime kept without command,
// both port strategies, plan-time rules, and virtual machines where the
// server can run them.

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// incusEnv is a fresh incus backend whose sandbox_image "test" imports the
// busybox rootfs tarball. Whatever a failed test leaves is swept.
func incusEnv(t *testing.T) accEnv {
	t.Helper()
	acctest.PreCheckIncus(t)
	acctest.AgentBinary(t)
	b := accBackend{driver: driver.Incus, precheck: acctest.PreCheckIncus, fixture: func(t *testing.T) string {
		return fmt.Sprintf("archive = { path = %q }", acctest.BusyboxRootfsTarball(t))
	}}
	e := accEnv{accBackend: b, name: acctest.RandomName("tf-acc"), source: b.fixture(t)}
	acctest.SweepOnCleanup(t, acctest.DriverConfig(driver.Incus, e.name))
	return e
}

// incusConfigKeys checks keys of the instance's Incus config as the engine
// reports it (`incus query`); "" means the key must be absent.
func incusConfigKeys(want map[string]string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		inst, err := incusInstance(s)
		if err != nil {
			return err
		}
		for k, v := range want {
			if got := inst.Config[k]; got != v {
				return fmt.Errorf("incus config %s = %q, want %q", k, got, v)
			}
		}
		return nil
	}
}

type incusQueried struct {
	Config  map[string]string            `json:"config"`
	Devices map[string]map[string]string `json:"devices"`
	Status  string                       `json:"status"`
}

// incusInstance reads the instance of the state from the server.
func incusInstance(s *terraform.State) (incusQueried, error) {
	var out incusQueried
	rs, ok := s.RootModule().Resources[instanceAddr]
	if !ok {
		return out, fmt.Errorf("%s not in state", instanceAddr)
	}
	project := rs.Primary.Attributes["backend.settings.project"]
	b, err := exec.Command("incus", "query", fmt.Sprintf("/1.0/instances/%s?project=%s", rs.Primary.ID, project)).Output()
	if err != nil {
		return out, fmt.Errorf("incus query instance %s in project %s: %w", rs.Primary.ID, project, err)
	}
	return out, json.Unmarshal(b, &out)
}

func TestAccInstance_incusBasic(t *testing.T) {
	e := incusEnv(t)
	cfg := e.config(backendOpts{}, sleepCmd+`
  labels = { team = "acc" }
  env    = { GREETING = "hi there" }
  cpus   = 0.5
  memory = "64MiB"
  pids_limit = 64
  disk   = "512MiB"`)
	runInstanceTest(t, e,
		resource.TestStep{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(driver.StatusRunning),
				statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("handle").AtMapKey("backend").AtMapKey("driver"), knownvalue.StringExact(driver.Incus)),
			},
			Check: resource.ComposeTestCheckFunc(
				checkExec("hi there", "sh", "-c", "echo $GREETING"),
				incusConfigKeys(map[string]string{
					"limits.cpu.allowance": "50ms/100ms", "limits.cpu": "", "limits.memory": "67108864",
					"limits.processes": "64", "user.team": "acc", "environment.GREETING": "hi there",
				}),
				checkIncusRootSize("536870912"),
			),
		},
		resource.TestStep{Config: cfg, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
		resource.TestStep{
			ResourceName:      instanceAddr,
			ImportState:       true,
			ImportStateIdFunc: importID(e.name),
			ImportStateVerify: true,
			// As on the other backends, driver.Instance does not carry the
			// settings back (the limits are checked in the config above).
			ImportStateVerifyIgnore: []string{"command", "env", "timeouts", "cpus", "memory", "pids_limit", "disk"},
		},
	)
}

// checkIncusRootSize checks the root disk device's size.
func checkIncusRootSize(want string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		inst, err := incusInstance(s)
		if err != nil {
			return err
		}
		if got := inst.Devices["root"]["size"]; got != want {
			return fmt.Errorf("root disk size %q, want %q (devices %v)", got, want, inst.Devices)
		}
		return nil
	}
}

func TestAccInstance_incusUpdateInPlace(t *testing.T) {
	e := incusEnv(t)
	sameID := statecheck.CompareValue(compare.ValuesSame())
	step := func(limits string, running bool, status string, action plancheck.ResourceActionType, keys map[string]string) resource.TestStep {
		return resource.TestStep{
			Config:           e.config(backendOpts{}, fmt.Sprintf("%s\n  %s\n  running = %t", sleepCmd, limits, running)),
			ConfigPlanChecks: expectAction(action),
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(status),
				sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
			},
			Check: incusConfigKeys(keys),
		}
	}
	runInstanceTest(t, e,
		// Without pids_limit a container gets driver.DefaultPidsLimit.
		step("cpus = 0.5\n  memory = \"64MiB\"", true, driver.StatusRunning, plancheck.ResourceActionCreate,
			map[string]string{"limits.cpu.allowance": "50ms/100ms", "limits.memory": "67108864", "limits.processes": "4096"}),
		// Fractional stays an allowance; whole becomes a count.
		step("cpus = 1.5\n  memory = \"128m\"", true, driver.StatusRunning, plancheck.ResourceActionUpdate,
			map[string]string{"limits.cpu.allowance": "150ms/100ms", "limits.cpu": "", "limits.memory": "134217728"}),
		step("cpus = 2\n  memory = \"128m\"", true, driver.StatusRunning, plancheck.ResourceActionUpdate,
			map[string]string{"limits.cpu.allowance": "", "limits.cpu": "2"}),
		step("cpus = 2\n  memory = \"128m\"", false, driver.StatusStopped, plancheck.ResourceActionUpdate, nil),
		step("cpus = 2\n  memory = \"128m\"", true, driver.StatusRunning, plancheck.ResourceActionUpdate,
			map[string]string{"limits.processes": "4096"}),
		// pids_limit = 0 lifts the default in place; a number sets it.
		step("cpus = 2\n  memory = \"128m\"\n  pids_limit = 0", true, driver.StatusRunning, plancheck.ResourceActionUpdate,
			map[string]string{"limits.processes": ""}),
		step("cpus = 2\n  memory = \"128m\"\n  pids_limit = 200", true, driver.StatusRunning, plancheck.ResourceActionUpdate,
			map[string]string{"limits.processes": "200"}),
	)
}

func TestAccInstance_incusForcedReplacement(t *testing.T) {
	e := incusEnv(t)
	mark := checkExec("", "touch", "/marker")
	fresh := checkExec("fresh", "sh", "-c", "test -e /marker || echo fresh")
	runInstanceTest(t, e,
		resource.TestStep{Config: e.config(backendOpts{}, sleepCmd), Check: mark},
		resource.TestStep{
			Config:            e.config(backendOpts{}, `command = ["sleep", "3601"]`),
			ConfigPlanChecks:  expectAction(plancheck.ResourceActionDestroyBeforeCreate),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning)},
			Check:             resource.ComposeTestCheckFunc(fresh, mark),
		},
		resource.TestStep{
			// Container to system container (no command): a new instance.
			Config:           e.config(backendOpts{}, ""),
			ConfigPlanChecks: expectAction(plancheck.ResourceActionDestroyBeforeCreate),
			Check:            resource.ComposeTestCheckFunc(fresh, checkExec("init", "cat", "/proc/1/comm")),
		},
	)
}

func TestAccInstance_incusDeletedOutside(t *testing.T) {
	e := incusEnv(t)
	cfg := e.config(backendOpts{}, sleepCmd)
	last := &lastState{}
	runInstanceTest(t, e,
		resource.TestStep{Config: cfg, Check: last.keep},
		resource.TestStep{
			PreConfig: last.engine(t, func(ctx context.Context, d driver.Driver, id string) error {
				return d.DeleteInstance(ctx, id)
			}),
			Config:            cfg,
			ConfigPlanChecks:  expectAction(plancheck.ResourceActionCreate),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning)},
		},
	)
}

func TestAccInstance_incusStoppedOutside(t *testing.T) {
	e := incusEnv(t)
	cfg := e.config(backendOpts{}, sleepCmd)
	last := &lastState{}
	sameID := statecheck.CompareValue(compare.ValuesSame())
	runInstanceTest(t, e,
		resource.TestStep{Config: cfg, Check: last.keep,
			ConfigStateChecks: []statecheck.StateCheck{sameID.AddStateValue(instanceAddr, tfjsonpath.New("id"))}},
		resource.TestStep{
			PreConfig: last.engine(t, func(ctx context.Context, d driver.Driver, id string) error {
				return d.StopInstance(ctx, id, time.Second)
			}),
			Config:           cfg,
			ConfigPlanChecks: expectAction(plancheck.ResourceActionUpdate),
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(driver.StatusRunning),
				sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
			},
		},
	)
}

// A system container (no command) with a lifetime: the engine side powers
// it off at the deadline; refresh reports it expired and keeps it.
func TestAccInstance_incusLifetime(t *testing.T) {
	e := incusEnv(t)
	cfg := e.config(backendOpts{}, `lifetime = "5s"`)
	sameID := statecheck.CompareValue(compare.ValuesSame())
	runInstanceTest(t, e,
		resource.TestStep{Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(driver.StatusRunning),
				statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("expires_at"), knownvalue.NotNull()),
				sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
			},
			Check: checkExec("init", "cat", "/proc/1/comm"),
		},
		resource.TestStep{
			PreConfig:        func() { time.Sleep(9 * time.Second) },
			Config:           cfg,
			ConfigPlanChecks: expectAction(plancheck.ResourceActionNoop),
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(driver.StatusExpired),
				sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
			},
			Check: checkIncusStatus("Stopped"), // stopped by the engine side, not just labelled
		},
	)
}

func checkIncusStatus(want string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		inst, err := incusInstance(s)
		if err != nil {
			return err
		}
		if inst.Status != want {
			return fmt.Errorf("incus reports %q, want %q", inst.Status, want)
		}
		return nil
	}
}

// Both port strategies: loopback_ip (one 127.0.0.x per sandbox, the
// container's port numbers) and dynamic (host ports picked for it).
func TestAccInstance_incusPorts(t *testing.T) {
	for _, strategy := range []string{driver.PortStrategyLoopbackIP, driver.PortStrategyDynamic} {
		t.Run(strategy, func(t *testing.T) {
			e := incusEnv(t)
			ep := knownvalue.StringRegexp(regexp.MustCompile(`^127\.\d+\.\d+\.\d+:8080$`))
			if strategy == driver.PortStrategyDynamic {
				ep = knownvalue.StringRegexp(regexp.MustCompile(`^[^:]+:\d+$`))
			}
			runInstanceTest(t, e, resource.TestStep{
				Config:            e.config(backendOpts{portStrategy: strategy}, httpdBody(8080, "")),
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("endpoints").AtMapKey("http"), ep)},
				Check:             checkEndpointServes("http", "hello"),
			})
		})
	}
}

func TestAccInstance_incusFilesAndVolumes(t *testing.T) {
	e := incusEnv(t)
	src := writeTempFile(t, "from-source")
	seed := t.TempDir()
	if err := writeFile(seed+"/data.txt", "seeded"); err != nil {
		t.Fatal(err)
	}
	volume := fmt.Sprintf(`
resource "sandbox_volume" "test" {
  backend = sandbox_backend.test.handle
  name    = "%s-vol"
  source  = %q
}
`, e.name, seed)
	// A system container this time: files are pushed before its init starts.
	cfg := e.configWith(backendOpts{}, volume, fmt.Sprintf(`
  files = [
    { path = "/etc/secret.txt", content = "s3cret", mode = "0600" },
    { path = "/opt/run.sh", source = %q, mode = "0755" },
  ]
  volumes = [{ volume = sandbox_volume.test.name, target = "/data", read_only = true }]`, src))
	runInstanceTest(t, e, resource.TestStep{Config: cfg, Check: resource.ComposeTestCheckFunc(
		checkExec("s3cret", "cat", "/etc/secret.txt"),
		checkExec("600", "stat", "-c", "%a", "/etc/secret.txt"),
		checkExec("from-source", "cat", "/opt/run.sh"),
		checkExec("755", "stat", "-c", "%a", "/opt/run.sh"),
		checkExec("seeded", "cat", "/data/data.txt"),
		checkExec("read-only", "sh", "-c", "touch /data/new 2>/dev/null && echo writable || echo read-only"),
	)})
}

// A command whose arguments hold spaces runs as written (through the
// agent's argv file, no shell quoting).
func TestAccInstance_incusCommandWithSpaces(t *testing.T) {
	e := incusEnv(t)
	cfg := e.config(backendOpts{}, `command = ["sh", "-c", "echo \"$0\" > /tmp/arg; exec sleep 3600", "a  b 'c'"]`)
	runInstanceTest(t, e, resource.TestStep{Config: cfg, Check: checkExecEventually("a  b 'c'", "cat", "/tmp/arg")})
}

// checkExecEventually is checkExec retried briefly (the command runs
// asynchronously to the create).
func checkExecEventually(want string, cmd ...string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			if err = checkExec(want, cmd...)(s); err == nil {
				return nil
			}
		}
		return err
	}
}

// The security settings as on Docker: read-only root, capabilities, no new
// privileges, for PID 1 and for commands run in the sandbox from outside.
func TestAccInstance_incusSecurity(t *testing.T) {
	e := incusEnv(t)
	body := sleepCmd + `
  security = {
    read_only_rootfs = true
    capabilities     = { add = ["NET_BIND_SERVICE"], drop = ["ALL"] }
  }`
	runInstanceTest(t, e, resource.TestStep{
		Config: e.config(backendOpts{}, body),
		Check: resource.ComposeTestCheckFunc(
			checkExec("NoNewPrivs:\t1", "grep", "NoNewPrivs", "/proc/1/status"),
			checkExec("CapEff:\t0000000000000400", "grep", "CapEff", "/proc/1/status"),
			checkExec("NoNewPrivs:\t1", "grep", "NoNewPrivs", "/proc/self/status"),
			checkExec("CapEff:\t0000000000000400", "grep", "CapEff", "/proc/self/status"),
			checkExec("read-only", "sh", "-c", "touch /new 2>/dev/null && echo writable || echo read-only"),
		),
	})
}

// Incus-specific rules fail the plan at the attribute, with the reason.
func TestAccInstance_incusBadInput(t *testing.T) {
	e := incusEnv(t)
	base := acctest.BackendConfig(driver.Incus, e.name)
	inst := func(body string) string {
		return base + fmt.Sprintf(`
resource "sandbox_instance" "test" {
  backend = sandbox_backend.test.handle
  image   = "sandbox-fixture/busybox"
  name    = %q
  %s
}
`, e.name, body)
	}
	steps := []resource.TestStep{
		{Config: inst(`type = "vm"` + "\n  " + sleepCmd), ExpectError: regexp.MustCompile(`(?s)Command Not Supported on Virtual Machines.*boots its image's own init`)},
		{Config: inst(`type = "vm"` + "\n  pids_limit = 10"), ExpectError: regexp.MustCompile(`(?s)Limit Not Supported on Virtual Machines.*pids_limit`)},
		{Config: inst(`type = "vm"` + "\n  security = { read_only_rootfs = true }"), ExpectError: regexp.MustCompile(`(?s)Read-Only Root File System Not Supported`)},
		{Config: inst(`user = "www-data"`), ExpectError: regexp.MustCompile(`(?s)User Must Be Numeric on Incus.*www-data`)},
		{Config: base + fmt.Sprintf(`
resource "sandbox_image" "test" {
  backend = sandbox_backend.test.handle
  name    = "%s-img"
  build   = { context = %q }
}
`, e.name, acctest.BusyboxContext(t)), ExpectError: regexp.MustCompile(`(?s)Image Source Not Supported.*build`)},
	}
	if !incusCanRunVMs(t) {
		// The server answers at plan time and reports no VM support.
		steps = append(steps, resource.TestStep{Config: inst(`type = "vm"`),
			ExpectError: regexp.MustCompile(`Virtual Machines Not Supported by This Server`)})
	}
	for i := range steps {
		steps[i].PlanOnly = true
	}
	runInstanceTest(t, e, steps...)
}

// incusCanRunVMs asks the server whether it runs the qemu driver.
func incusCanRunVMs(t *testing.T) bool {
	t.Helper()
	d := acctest.OpenDriver(t, acctest.DriverConfig(driver.Incus, "tf-acc-vmcheck"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := d.Info(ctx)
	if err != nil {
		t.Fatalf("incus Info: %v", err)
	}
	return info.Has(driver.CapVMs)
}

// A virtual machine, where the server can run them. It needs an image with
// a VM variant (kernel, bootloader, incus-agent): SANDBOX_ACC_INCUS_VM_IMAGE.
func TestAccInstance_incusVM(t *testing.T) {
	e := incusEnv(t)
	if !incusCanRunVMs(t) {
		t.Skip("this Incus server cannot run virtual machines (no qemu driver or no KVM on this host): " +
			"the VM acceptance test runs only where it can; VM requests are unit-tested in internal/driver/incus")
	}
	image := acctest.TestEnv("SANDBOX_ACC_INCUS_VM_IMAGE")
	if image == "" {
		t.Fatal("the server runs VMs: set SANDBOX_ACC_INCUS_VM_IMAGE to a VM image alias in its default project")
	}
	cfg := acctest.BackendConfig(driver.Incus, e.name) + fmt.Sprintf(`
resource "sandbox_instance" "test" {
  backend = sandbox_backend.test.handle
  image   = %q
  name    = %q
  type    = "vm"
  cpus    = 1
  memory  = "512MiB"
  disk    = "4GiB"
  files   = [{ path = "/root/hello.txt", content = "hello" }]
}
`, image, e.name)
	runInstanceTest(t, e, resource.TestStep{
		Config:            cfg,
		ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning)},
		Check: resource.ComposeTestCheckFunc(
			incusConfigKeys(map[string]string{"limits.cpu": "1", "limits.memory": "536870912"}),
			checkIncusRootSize("4294967296"),
			checkExecEventually("hello", "cat", "/root/hello.txt"),
		),
	})
}
