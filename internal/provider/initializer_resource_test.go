package provider_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// commandsBody copies a file in, runs two commands with env, and keeps
// side effects a re-run or on_destroy leaves in the instance.
func commandsBody(onDestroy, trigger string) string {
	return `
  files = [
    { path = "/srv/data/greeting.txt", content = "hello", mode = "0600" },
    { path = "/srv/data/token", content = "tok-3f9a2c71e5", mode = "0600" },
  ]
  commands = [
    ["sh", "-c", "cat /srv/data/greeting.txt; echo \" $WHO\""],
    ["sh", "-c", "echo run >> /srv/runs; echo oops >&2; echo token; cat /srv/data/token"],
  ]
  env        = { WHO = "world" }
  on_destroy = [["sh", "-c", "echo ` + onDestroy + ` >> /srv/bye"]]
  triggers   = { v = "` + trigger + `" }`
}

func TestAccInitializer_commands(t *testing.T) {
	eachInitBackend(t, func(t *testing.T, e accEnv) {
		first := e.initConfig("", initializer("test", commandsBody("bye1", "1")))
		runInitTest(t, e,
			resource.TestStep{
				Config: first,
				ConfigStateChecks: []statecheck.StateCheck{
					expectInit(initAddr, tfjsonpath.New("id"), knownvalue.StringRegexp(regexp.MustCompile(`^init-[a-z0-9]{10}$`))),
					expectInit(initAddr, tfjsonpath.New("results"), knownvalue.ListSizeExact(2)),
					expectInit(initAddr, result(0, "stdout"), knownvalue.StringExact("hello world\n")),
					expectInit(initAddr, result(0, "exit_code"), knownvalue.Int64Exact(0)),
					expectInit(initAddr, result(0, "command"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("sh"), knownvalue.StringExact("-c"), knownvalue.NotNull()})),
					expectInit(initAddr, result(1, "stderr"), knownvalue.StringExact("oops\n")),
					// A file's content is masked where a command prints it ("hello" is too short to be).
					expectInit(initAddr, result(1, "stdout"), knownvalue.StringExact("token\n(sensitive)")),
					expectInit(initAddr, tfjsonpath.New("ready_at"), knownvalue.Null()),
					expectInit(initAddr, tfjsonpath.New("service_running"), knownvalue.Null()),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					inInstance("run", "cat /srv/runs"),
					inInstance("600", "stat -c %a /srv/data/greeting.txt"),
				),
			},
			resource.TestStep{Config: first, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
			// on_destroy only matters at destroy: it changes in place, nothing re-runs.
			resource.TestStep{
				Config:           e.initConfig("", initializer("test", commandsBody("bye2", "1"))),
				ConfigPlanChecks: planExpects(initAddr, plancheck.ResourceActionUpdate),
				Check:            inInstance("run", "cat /srv/runs"),
			},
			// A trigger re-runs it: on_destroy of the old one, then everything.
			resource.TestStep{
				Config:           e.initConfig("", initializer("test", commandsBody("bye3", "2"))),
				ConfigPlanChecks: planExpects(initAddr, plancheck.ResourceActionDestroyBeforeCreate),
				Check: resource.ComposeAggregateTestCheckFunc(
					inInstance("run\nrun", "cat /srv/runs"),
					inInstance("bye2", "cat /srv/bye"),
				),
			},
			resource.TestStep{ResourceName: initAddr, ImportState: true, ImportStateId: "anything",
				ExpectError: loose("Import Not Supported")},
		)
	})
}

func TestAccInitializer_failingCommand(t *testing.T) {
	eachInitBackend(t, func(t *testing.T, e accEnv) {
		failing := initializer("test", `
  commands = [
    ["sh", "-c", "echo partial"],
    ["sh", "-c", "echo first line >&2; echo something broke >&2; exit 3"],
    ["sh", "-c", "touch /srv/never"],
  ]`)
		fixed := initializer("test", `commands = [["sh", "-c", "echo fixed"]]`)
		runInitTest(t, e,
			resource.TestStep{
				Config: e.initConfig("", failing),
				ExpectError: loose(`Unable to Create Sandbox Initializer`, `instance "`+e.name+`" of `+e.driver+` backend`,
					`step 2 of 3`, `exited with status 3: something broke`,
					`End of the stderr`, `exit code 3`, "first line\nsomething broke", `tainted`),
			},
			// The failed run stays in state, tainted: the next apply replaces it.
			resource.TestStep{
				Config:           e.initConfig("", fixed),
				ConfigPlanChecks: planExpects(initAddr, plancheck.ResourceActionDestroyBeforeCreate),
				ConfigStateChecks: []statecheck.StateCheck{
					expectInit(initAddr, result(0, "stdout"), knownvalue.StringExact("fixed\n")),
				},
				Check: inInstance("absent", "test -e /srv/never && echo present || echo absent"),
			},
		)
	})
}

// probeInitializers are three services on one instance, one per probe
// kind, run in order through depends_on.
const probeInitializers = `
resource "sandbox_initializer" "tcp" {
  instance = sandbox_instance.test.handle
  files    = [{ path = "/srv/a/index.html", content = "from-a" }]
  service = {
    command = ["httpd", "-f", "-p", "18081", "-h", "/srv/a"]
    ready   = { tcp_port = 18081 }
    timeout = "30s"
  }
}

resource "sandbox_initializer" "http" {
  instance   = sandbox_instance.test.handle
  files      = [{ path = "/srv/b/health", content = "ok" }]
  service = {
    command = ["httpd", "-f", "-p", "18082", "-h", "/srv/b"]
    ready   = { http = { port = 18082, path = "/health", status = 200 } }
  }
  depends_on = [sandbox_initializer.tcp]
}

resource "sandbox_initializer" "command" {
  instance = sandbox_instance.test.handle
  service = {
    command = ["sh", "-c", "sleep 1; touch /srv/cmd-ready; exec sleep 3600"]
    ready   = { command = ["test", "-f", "/srv/cmd-ready"] }
  }
  depends_on = [sandbox_initializer.http]
}
`

func TestAccInitializer_serviceProbes(t *testing.T) {
	eachInitBackend(t, func(t *testing.T, e accEnv) {
		cfg := e.initConfig("", probeInitializers)
		var last lastState
		var checks []statecheck.StateCheck
		for _, n := range []string{"tcp", "http", "command"} {
			addr := "sandbox_initializer." + n
			checks = append(checks,
				expectInit(addr, tfjsonpath.New("ready_at"), knownvalue.StringRegexp(rfc3339Re)),
				expectInit(addr, tfjsonpath.New("service_running"), knownvalue.Bool(true)),
				expectInit(addr, tfjsonpath.New("service_log"), knownvalue.StringRegexp(regexp.MustCompile(`^/\.sandbox/run/init-[a-z0-9]+\.log$`))),
				// the agent's service start is the one result
				expectInit(addr, result(0, "description"), knownvalue.StringExact("start service")))
		}
		runInitTest(t, e,
			resource.TestStep{
				Config:            cfg,
				ConfigStateChecks: checks,
				Check: resource.ComposeAggregateTestCheckFunc(
					inInstance("from-a", "wget -qO- http://127.0.0.1:18081/index.html"),
					inInstance("ok", "wget -qO- http://127.0.0.1:18082/health"),
					last.keep,
				),
			},
			// A service that died is seen at refresh and started again by a replacement.
			resource.TestStep{
				PreConfig: last.killService(t, "sandbox_initializer.tcp"),
				Config:    cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("sandbox_initializer.tcp", plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectResourceAction("sandbox_initializer.http", plancheck.ResourceActionNoop),
				}},
				Check: inInstance("from-a", "wget -qO- http://127.0.0.1:18081/index.html"),
			},
		)
	})
}

func TestAccInitializer_readinessTimeout(t *testing.T) {
	eachInitBackend(t, func(t *testing.T, e accEnv) {
		stuck := initializer("test", `
  service = {
    command = ["sh", "-c", "echo starting up; echo fatal: no config file >&2; exec sleep 3599"]
    ready   = { tcp_port = 18099 }
    timeout = "3s"
  }`)
		runInitTest(t, e,
			resource.TestStep{
				Config: e.initConfig("", stuck),
				ExpectError: loose(`Unable to Create Sandbox Initializer`, `service not ready after 3s`, `last probe`,
					`18099`, `is still running`, `end of service log`, `starting up`, `fatal: no config file`),
			},
			// Kept in state (tainted), so the started service is tracked and replaced.
			resource.TestStep{
				Config:           e.initConfig("", initializer("test", `service = { command = ["sleep", "3602"] }`)),
				ConfigPlanChecks: planExpects(initAddr, plancheck.ResourceActionDestroyBeforeCreate),
				Check:            inInstance("stopped", `ps | grep -q "sleep 359[9]" && echo running || echo stopped`),
			},
		)
	})
}

func TestAccInitializer_onDestroy(t *testing.T) {
	eachInitBackend(t, func(t *testing.T, e accEnv) {
		body := `
  service    = { command = ["sleep", "3601"] }
  on_destroy = [
    ["sh", "-c", "echo bye > /srv/bye"],
    ["sh", "-c", "echo cleanup failed >&2; exit 7"],
  ]`
		runInitTest(t, e,
			resource.TestStep{
				Config: e.initConfig("", initializer("test", body)),
				Check:  inInstance("running", `ps | grep -q "sleep 360[1]" && echo running || echo stopped`),
			},
			// Removing the initializer keeps the instance: on_destroy ran (its
			// failure is only a warning) and the service was stopped.
			resource.TestStep{
				Config: e.initConfig("", ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					inInstance("bye", "cat /srv/bye"),
					inInstance("stopped", `ps | grep -q "sleep 360[1]" && echo running || echo stopped`),
				),
			},
		)
	})
}

func TestAccInitializer_instanceReplaced(t *testing.T) {
	eachInitBackend(t, func(t *testing.T, e accEnv) {
		init := initializer("test", `
  commands   = [["sh", "-c", "echo ran > /srv/ran"]]
  on_destroy = [["sh", "-c", "echo bye"]]`)
		var last lastState
		runInitTest(t, e,
			resource.TestStep{
				Config: e.initConfig("", init),
				Check:  resource.ComposeAggregateTestCheckFunc(inInstance("ran", "cat /srv/ran"), last.keep),
			},
			// The sandbox deleted outside Terraform: both are planned again.
			resource.TestStep{
				PreConfig:        last.deleteInstance(t),
				Config:           e.initConfig("", init),
				ConfigPlanChecks: planExpects(initAddr, plancheck.ResourceActionCreate),
				Check:            inInstance("ran", "cat /srv/ran"),
			},
			// The sandbox replaced by Terraform: the initializer is replaced with it.
			resource.TestStep{
				Config:           e.initConfig(`env = { REPLACED = "1" }`, init),
				ConfigPlanChecks: planExpects(initAddr, plancheck.ResourceActionDestroyBeforeCreate),
				Check:            inInstance("ran", "cat /srv/ran"),
			},
			// A stopped sandbox keeps its initializer: a refresh changes nothing.
			resource.TestStep{
				Config:           e.initConfig("env = { REPLACED = \"1\" }\n  running = false", init),
				ConfigPlanChecks: planExpects(initAddr, plancheck.ResourceActionNoop),
			},
		)
	})
}
