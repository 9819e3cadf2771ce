package provider_test

import (
	"context"
	"fmt"
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

const sleepCmd = `command = ["sleep", "3600"]`

// runInstanceTest runs steps with CheckDestroy asking the engine.
func runInstanceTest(t *testing.T, e accEnv, steps ...resource.TestStep) {
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories, CheckDestroy: e.checkDestroy(), Steps: steps})
}

func expectStatus(s string) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("status"), knownvalue.StringExact(s))
}

func expectAction(a plancheck.ResourceActionType) resource.ConfigPlanChecks {
	return resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(instanceAddr, a)}}
}

func TestAccInstance_basic(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		cfg := e.config(backendOpts{}, sleepCmd+"\n  labels = { team = \"acc\" }\n  env = { GREETING = \"hi\" }")
		runInstanceTest(t, e,
			resource.TestStep{
				Config: cfg,
				ConfigStateChecks: []statecheck.StateCheck{
					expectStatus(driver.StatusRunning),
					statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("id"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("handle").AtMapKey("name"), knownvalue.StringExact(e.name)),
					statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("handle").AtMapKey("backend").AtMapKey("driver"), knownvalue.StringExact(e.driver)),
					statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("expires_at"), knownvalue.Null()),
					statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("security").AtMapKey("no_new_privileges"), knownvalue.Bool(true)),
				},
				Check: checkExec("hi", "sh", "-c", "echo $GREETING"),
			},
			resource.TestStep{Config: cfg, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
			resource.TestStep{
				ResourceName:            instanceAddr,
				ImportState:             true,
				ImportStateIdFunc:       importID(e.name),
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			resource.TestStep{ResourceName: instanceAddr, ImportState: true, ImportStateId: "no-instance-name",
				ExpectError: regexp.MustCompile(`Invalid Sandbox Instance Import ID`)},
			resource.TestStep{ResourceName: instanceAddr, ImportState: true, ImportStateIdFunc: importID("tf-acc-missing"),
				ExpectError: regexp.MustCompile(`no\s+instance\s+named\s+"tf-acc-missing"`)},
		)
	})
}

// importID is `<backend import ID>/<name>`; sandbox_backend's id is its import ID.
func importID(name string) resource.ImportStateIdFunc {
	return func(s *terraform.State) (string, error) {
		rs, ok := s.RootModule().Resources["sandbox_backend.test"]
		if !ok {
			return "", fmt.Errorf("sandbox_backend.test not in state")
		}
		return rs.Primary.ID + "/" + name, nil
	}
}

func TestAccInstance_updateInPlace(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		cfg := func(limits string, running bool) string {
			return e.config(backendOpts{}, fmt.Sprintf("%s\n  %s\n  running = %t", sleepCmd, limits, running))
		}
		sameID := statecheck.CompareValue(compare.ValuesSame())
		step := func(limits string, running bool, status string, action plancheck.ResourceActionType) resource.TestStep {
			return resource.TestStep{
				Config:           cfg(limits, running),
				ConfigPlanChecks: expectAction(action),
				ConfigStateChecks: []statecheck.StateCheck{
					expectStatus(status),
					sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
				},
			}
		}
		runInstanceTest(t, e,
			step(`cpus = 0.5
  memory = "64MiB"
  pids_limit = 64`, true, driver.StatusRunning, plancheck.ResourceActionCreate),
			step(`cpus = 1
  memory = "128m"
  pids_limit = 128`, true, driver.StatusRunning, plancheck.ResourceActionUpdate),
			step(`cpus = 1
  memory = "128m"
  pids_limit = 128`, false, driver.StatusStopped, plancheck.ResourceActionUpdate),
			step(`cpus = 1
  memory = "128m"
  pids_limit = 128`, true, driver.StatusRunning, plancheck.ResourceActionUpdate),
		)
	})
}

func TestAccInstance_forcedReplacement(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		// A marker written into the sandbox is gone after a replacement
		// (IDs may repeat: the local driver's ID is the name).
		mark := checkExec("", "touch", "/marker")
		fresh := checkExec("fresh", "sh", "-c", "test -e /marker || echo fresh")
		runInstanceTest(t, e,
			resource.TestStep{Config: e.config(backendOpts{}, sleepCmd+"\n  memory = \"64MiB\""), Check: mark},
			resource.TestStep{
				Config:            e.config(backendOpts{}, `command = ["sleep", "3601"]`+"\n  memory = \"64MiB\""),
				ConfigPlanChecks:  expectAction(plancheck.ResourceActionDestroyBeforeCreate),
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning)},
				Check:             resource.ComposeTestCheckFunc(fresh, mark),
			},
			resource.TestStep{
				// Engines cannot lift a limit in place: removing one replaces.
				Config:           e.config(backendOpts{}, `command = ["sleep", "3601"]`),
				ConfigPlanChecks: expectAction(plancheck.ResourceActionDestroyBeforeCreate),
				Check:            fresh,
			},
		)
	})
}

func TestAccInstance_deletedOutside(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
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
	})
}

func TestAccInstance_stoppedOutside(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
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
				Config: cfg,
				// Started again in place: `running` is the wish, `status` the observation.
				ConfigPlanChecks: expectAction(plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{
					expectStatus(driver.StatusRunning),
					sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
				},
			},
		)
	})
}

func TestAccInstance_lifetime(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		cfg := e.config(backendOpts{}, sleepCmd+"\n  lifetime = \"5s\"")
		sameID := statecheck.CompareValue(compare.ValuesSame())
		runInstanceTest(t, e,
			resource.TestStep{Config: cfg, ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(driver.StatusRunning),
				statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("expires_at"), knownvalue.NotNull()),
				sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
			}},
			resource.TestStep{
				PreConfig: func() { time.Sleep(8 * time.Second) },
				Config:    cfg,
				// Refresh sees it expired and keeps it: no replacement, no restart.
				ConfigPlanChecks: expectAction(plancheck.ResourceActionNoop),
				ConfigStateChecks: []statecheck.StateCheck{
					expectStatus(driver.StatusExpired),
					sameID.AddStateValue(instanceAddr, tfjsonpath.New("id")),
				},
			},
			resource.TestStep{
				// Imported, an expired sandbox is not running.
				ResourceName:      instanceAddr,
				ImportState:       true,
				ImportStateIdFunc: importID(e.name),
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if len(states) != 1 {
						return fmt.Errorf("imported %d objects, want 1", len(states))
					}
					a := states[0].Attributes
					if a["status"] != driver.StatusExpired || a["running"] != "false" {
						return fmt.Errorf("imported expired instance: status %q running %q, want %q \"false\"", a["status"], a["running"], driver.StatusExpired)
					}
					return nil
				},
			},
		)
	})
}

// httpdBody serves "hello" from busybox httpd on port in the sandbox.
func httpdBody(port int, extra string) string {
	return fmt.Sprintf(`command = ["httpd", "-f", "-p", "%d", "-h", "/www"]
  files   = [{ path = "/www/index.html", content = "hello" }]
  ports   = [{ name = "http", port = %d }]
  %s`, port, port, extra)
}

func TestAccInstance_ports(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		type variant struct {
			name string
			opts backendOpts
			body string
		}
		variants := []variant{{"bridge", backendOpts{}, httpdBody(20000+int(time.Now().UnixNano()%20000), `network = "bridge"`)}}
		if e.driver == driver.Docker {
			variants = []variant{
				{"loopback_ip", backendOpts{portStrategy: driver.PortStrategyLoopbackIP}, httpdBody(8080, "")},
				{"dynamic", backendOpts{portStrategy: driver.PortStrategyDynamic}, httpdBody(8080, "")},
			}
		}
		for _, v := range variants {
			t.Run(v.name, func(t *testing.T) {
				e := e
				e.name = acctest.RandomName("tf-acc")
				checks := []statecheck.StateCheck{statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("endpoints").AtMapKey("http"), knownvalue.NotNull())}
				if v.opts.portStrategy == driver.PortStrategyLoopbackIP {
					checks = append(checks, statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("loopback_ip"), knownvalue.StringRegexp(loopbackRe)))
				}
				runInstanceTest(t, e, resource.TestStep{
					Config:            e.config(v.opts, v.body),
					ConfigStateChecks: checks,
					Check:             checkEndpointServes("http", "hello"),
				})
			})
		}
	})
}

// checkEndpointServes is checkServes of the test instance.
func checkEndpointServes(port, want string) resource.TestCheckFunc {
	return checkServes(instanceAddr, port, want)
}

func TestAccInstance_filesAndVolumes(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
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
		cfg := e.configWith(backendOpts{}, volume, sleepCmd+fmt.Sprintf(`
  files = [
    { path = "/etc/secret.txt", content = "s3cret", mode = "0600" },
    { path = "/opt/run.sh", source = %q, mode = "0755" },
  ]
  volumes = [{ volume = sandbox_volume.test.name, target = "/data", read_only = true }]`, src))
		runInstanceTest(t, e,
			resource.TestStep{Config: cfg, Check: resource.ComposeTestCheckFunc(
				checkExec("s3cret", "cat", "/etc/secret.txt"),
				checkExec("600", "stat", "-c", "%a", "/etc/secret.txt"),
				checkExec("from-source", "cat", "/opt/run.sh"),
				checkExec("755", "stat", "-c", "%a", "/opt/run.sh"),
				checkExec("seeded", "cat", "/data/data.txt"),
				checkExec("read-only", "sh", "-c", "touch /data/new 2>/dev/null && echo writable || echo read-only"),
				resource.TestMatchResourceAttr(instanceAddr, "files.1.source_hash", sha256Re),
				resource.TestCheckNoResourceAttr(instanceAddr, "files.0.source_hash"),
			)},
			resource.TestStep{
				// Editing the source file, and nothing else, replaces the sandbox.
				PreConfig: func() {
					if err := writeFile(src, "edited"); err != nil {
						t.Fatal(err)
					}
				},
				Config:           cfg,
				ConfigPlanChecks: expectAction(plancheck.ResourceActionDestroyBeforeCreate),
				Check:            checkExec("edited", "cat", "/opt/run.sh"),
			},
		)
	})
}

func TestAccInstance_security(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		body := sleepCmd + `
  security = {
    read_only_rootfs = true
    capabilities     = { add = ["NET_BIND_SERVICE"], drop = ["ALL"] }
  }`
		runInstanceTest(t, e, resource.TestStep{
			Config: e.config(backendOpts{}, body),
			ConfigStateChecks: []statecheck.StateCheck{
				// Unset fields keep their safe defaults.
				statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("security").AtMapKey("no_new_privileges"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("security").AtMapKey("privileged"), knownvalue.Bool(false)),
			},
			Check: resource.ComposeTestCheckFunc(
				// PID 1 is the sandbox's own init, started by the engine.
				checkExec("NoNewPrivs:\t1", "grep", "NoNewPrivs", "/proc/1/status"),
				checkExec("CapEff:\t0000000000000400", "grep", "CapEff", "/proc/1/status"),
				// A command run in it from outside is held the same way.
				checkExec("NoNewPrivs:\t1", "grep", "NoNewPrivs", "/proc/self/status"),
				checkExec("CapEff:\t0000000000000400", "grep", "CapEff", "/proc/self/status"),
				checkExec("read-only", "sh", "-c", "touch /new 2>/dev/null && echo writable || echo read-only"),
			),
		})
	})
}

// A failed create leaves nothing on the engine and nothing in state.
func TestAccInstance_createFails(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		cfg := acctest.BackendConfig(e.driver, e.name) + fmt.Sprintf(`
resource "sandbox_instance" "test" {
  backend = sandbox_backend.test.handle
  image   = "tf-acc-missing-image:latest"
  name    = %q
  %s
}
`, e.name, sleepCmd)
		runInstanceTest(t, e, resource.TestStep{
			Config:      cfg,
			ExpectError: regexp.MustCompile(`Unable to Create Sandbox Instance`),
			Check:       resource.TestCheckNoResourceAttr(instanceAddr, "id"),
		})
	})
}
