package provider_test

// A fleet applied and destroyed several times in a row while the test keeps
// the cores busy: zero failures and nothing tainted (every apply must
// succeed and re-plan empty), on every backend whose gate is set.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// fleetSize is the number of instances per apply.
const fleetSize = 30

// fleetRounds is how many times the fleet is applied and destroyed:
// $SANDBOX_FLEET_ROUNDS, else 10 with SANDBOX_STRESS set, else 1 (what a
// CI run affords: about 1.5 min per backend on a loaded 2-core machine).
func fleetRounds(t *testing.T) int {
	if v := os.Getenv("SANDBOX_FLEET_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SANDBOX_FLEET_ROUNDS=%q: want a whole number of at least 1", v)
		}
		return n
	}
	if os.Getenv("SANDBOX_STRESS") != "" {
		return 10
	}
	return 1
}

// fleetAskedFor reports a run that asked for more than the default round.
func fleetAskedFor() bool {
	return os.Getenv("SANDBOX_STRESS") != "" || os.Getenv("SANDBOX_FLEET_ROUNDS") != ""
}

// fleetBackend is one engine the fleet runs on.
type fleetBackend struct {
	name     string
	optIn    bool // runs only when more than the default round is asked for
	precheck func(*testing.T)
	config   func(name string) driver.Config
	backend  func(cfg driver.Config) string // HCL of sandbox_backend.test
	image    func(t *testing.T) string      // the image's source attribute
}

func fleetBackends() []fleetBackend {
	local := func(cfg driver.Config) string { return acctest.BackendConfig(cfg.Driver, cfg.Name) }
	build := func(t *testing.T) string { return fmt.Sprintf("build = { context = %q }", acctest.BusyboxContext(t)) }
	archive := func(t *testing.T) string {
		return fmt.Sprintf("archive = { path = %q }", acctest.BusyboxRootfsTarball(t))
	}
	named := func(drv string) func(string) driver.Config {
		return func(name string) driver.Config { return acctest.DriverConfig(drv, name) }
	}
	return []fleetBackend{
		{name: driver.Docker, precheck: acctest.PreCheckDocker, config: named(driver.Docker), backend: local, image: build},
		// Over SSH a round takes as long as the other three together: not in
		// the default run's budget.
		{name: "docker-ssh", optIn: true, precheck: acctest.PreCheckSSH, config: acctest.SSHDriverConfig, image: build,
			backend: func(cfg driver.Config) string {
				return fmt.Sprintf("resource \"sandbox_backend\" \"test\" {\n  name   = %q\n  docker = {\n%s  }\n}\n", cfg.Name, acctest.DockerBlock(cfg.Docker))
			}},
		{name: driver.Local, precheck: acctest.PreCheckLocal, config: named(driver.Local), backend: local, image: archive},
		{name: driver.Incus, precheck: acctest.PreCheckIncus, config: named(driver.Incus), backend: local, image: archive},
	}
}

// TestAccFleetUnderLoad applies a fleet of fleetSize instances and destroys
// it again, fleetRounds times, with every core kept busy by the test.
func TestAccFleetUnderLoad(t *testing.T) {
	rounds := fleetRounds(t)
	for _, b := range fleetBackends() {
		t.Run(b.name, func(t *testing.T) {
			if b.optIn && !fleetAskedFor() {
				t.Skip("over SSH the fleet runs with SANDBOX_STRESS=1 or SANDBOX_FLEET_ROUNDS set")
			}
			b.precheck(t)
			acctest.AgentBinary(t)
			cfg := b.config(acctest.RandomName("tf-acc"))
			acctest.SweepOnCleanup(t, cfg)
			base := b.backend(cfg) + fmt.Sprintf(`
resource "sandbox_image" "test" {
  backend = sandbox_backend.test.handle
  name    = "%s-img"
  %s
}
`, cfg.Name, b.image(t))
			withFleet := base + fmt.Sprintf(`
resource "sandbox_instance" "fleet" {
  count   = %d
  backend = sandbox_backend.test.handle
  image   = sandbox_image.test.image_id
  name    = "fleet-${count.index}"
  command = ["sleep", "3600"]
}
`, fleetSize)
			var steps []resource.TestStep
			for range rounds {
				steps = append(steps,
					resource.TestStep{Config: withFleet, Check: checkFleet(fleetSize)},
					resource.TestStep{Config: base, Check: checkFleet(0)})
			}
			busyCores(t, time.Duration(rounds)*10*time.Minute)
			start := time.Now()
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
				CheckDestroy:             acctest.CheckNoManagedObjects(cfg),
				Steps:                    steps,
			})
			t.Logf("%s: %d rounds of %d instances applied and destroyed in %s under load", b.name, rounds, fleetSize, time.Since(start).Round(time.Second))
		})
	}
}

// checkFleet checks that the state holds n fleet instances, all running.
func checkFleet(n int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		got := 0
		for addr, rs := range s.RootModule().Resources {
			if !strings.HasPrefix(addr, "sandbox_instance.fleet") {
				continue
			}
			got++
			if st := rs.Primary.Attributes["status"]; st != driver.StatusRunning {
				return fmt.Errorf("%s is %q, want running", addr, st)
			}
		}
		if got != n {
			return fmt.Errorf("%d fleet instances in state, want %d", got, n)
		}
		return nil
	}
}

// busyCores keeps every core busy with spinning goroutines until the test
// ends or bound passes, whichever comes first.
func busyCores(t *testing.T, bound time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(1)
			for ctx.Err() == nil {
				for i := 0; i < 1_000_000; i++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			spinSink.Store(x)
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// spinSink keeps the spinning loops' result alive, so they are not optimised away.
var spinSink atomic.Uint64
