package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/provider"
)

// The server's fast paths (server.go) answer an unchanged refresh, an
// unchanged plan and a destroy plan, and never hide drift: a sandbox
// stopped outside Terraform is still planned for a start.
func TestAccInstance_fastPathsKeepDrift(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		factories, counts := provider.CountingFactories()
		cfg := e.config(backendOpts{}, sleepCmd)
		last := &lastState{}
		answered := func(what string, n func(provider.FastPathCounts) int64) resource.TestCheckFunc {
			return func(*terraform.State) error {
				if n(counts()) == 0 {
					return fmt.Errorf("the fast %s never answered: %+v", what, counts())
				}
				return nil
			}
		}
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: factories,
			CheckDestroy:             e.checkDestroy(),
			Steps: []resource.TestStep{
				{Config: cfg, Check: last.keep},
				{
					Config:           cfg,
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
					Check: resource.ComposeTestCheckFunc(
						answered("read", func(c provider.FastPathCounts) int64 { return c.Reads }),
						answered("plan", func(c provider.FastPathCounts) int64 { return c.Plans }),
						last.keep),
				},
				{
					PreConfig: last.engine(t, func(ctx context.Context, d driver.Driver, id string) error {
						return d.StopInstance(ctx, id, time.Second)
					}),
					Config:            cfg,
					ConfigPlanChecks:  expectAction(plancheck.ResourceActionUpdate),
					ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning)},
				},
			},
		})
		if !t.Failed() && counts().Destroys == 0 {
			t.Errorf("the fast destroy plan never answered: %+v", counts())
		}
	})
}

// Removing a setting from the configuration plans its default, on every
// backend: a stopped sandbox is started again (in place), a relaxed
// security setting and the bridge network are taken back (replacements).
// Each step ends with terraform's own empty re-plan check.
func TestAccInstance_removedSettingsPlanDefaults(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) { runInstanceTest(t, e, removedSettingsSteps(e)...) })
}

func TestAccInstance_incusRemovedSettingsPlanDefaults(t *testing.T) {
	e := incusEnv(t)
	runInstanceTest(t, e, removedSettingsSteps(e)...)
}

func removedSettingsSteps(e accEnv) []resource.TestStep {
	const (
		stopped  = "\n  running = false"
		relaxed  = "\n  security = { no_new_privileges = false }"
		bridged  = "\n  network = \"bridge\""
		noNewPrv = "grep NoNewPrivs /proc/1/status | cut -f2"
	)
	// bubblewrap sets no_new_privs on every sandbox, whatever is asked.
	relaxedNoNewPrivs := map[string]string{driver.Local: "1"}[e.driver]
	if relaxedNoNewPrivs == "" {
		relaxedNoNewPrivs = "0"
	}
	value := func(attr string, v knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New(attr), v)
	}
	var engineName knownvalue.Check = knownvalue.StringExact(e.name + "-" + e.name) // <backend>-<name>
	if e.driver == driver.Local {
		engineName = knownvalue.StringRegexp(regexp.MustCompile("/" + e.name + "/instances/" + e.name + "$"))
	}
	return []resource.TestStep{
		{
			Config: e.config(backendOpts{}, sleepCmd+stopped+relaxed+bridged),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusCreated), value("engine_name", engineName),
				statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("security").AtMapKey("no_new_privileges"), knownvalue.Bool(false))},
		},
		{
			Config:            e.config(backendOpts{}, sleepCmd+relaxed+bridged),
			ConfigPlanChecks:  expectAction(plancheck.ResourceActionUpdate),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning), value("running", knownvalue.Bool(true))},
			Check:             checkExec(relaxedNoNewPrivs, "sh", "-c", noNewPrv),
		},
		{
			Config:           e.config(backendOpts{}, sleepCmd+bridged),
			ConfigPlanChecks: expectAction(plancheck.ResourceActionDestroyBeforeCreate),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning),
				statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("security").AtMapKey("no_new_privileges"), knownvalue.Bool(true)),
				value("network", knownvalue.StringExact(driver.NetworkBridge))},
			Check: checkExec("1", "sh", "-c", noNewPrv),
		},
		{
			Config:            e.config(backendOpts{}, sleepCmd),
			ConfigPlanChecks:  expectAction(plancheck.ResourceActionDestroyBeforeCreate),
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusRunning), value("network", knownvalue.StringExact(driver.NetworkIsolated))},
		},
	}
}
