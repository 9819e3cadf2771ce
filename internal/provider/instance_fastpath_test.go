package provider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

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
