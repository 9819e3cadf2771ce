package provider_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// planExpects checks the planned action of addr before apply, and that the
// plan after apply and refresh is empty.
func planExpects(addr string, action plancheck.ResourceActionType) resource.ConfigPlanChecks {
	return resource.ConfigPlanChecks{
		PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, action)},
		PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
	}
}

// createFingerprintedStep creates addr, an object with a local source: its
// source_hash is known in the plan, before anything reaches the engine, and
// the plan after apply and refresh is empty.
func createFingerprintedStep(addr, config string, checks ...statecheck.StateCheck) resource.TestStep {
	return resource.TestStep{
		Config: config,
		ConfigPlanChecks: resource.ConfigPlanChecks{
			PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue(addr, tfjsonpath.New("source_hash"), knownvalue.StringRegexp(sourceHashRe)),
			},
			PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
		},
		ConfigStateChecks: checks,
	}
}

// deletedOutsideStep deletes addr's object on the engine of cfg with del;
// planning config then creates it again.
func deletedOutsideStep(t *testing.T, cfg driver.Config, addr, config string, del func(context.Context, driver.Driver) error) resource.TestStep {
	return resource.TestStep{
		PreConfig: func() {
			if err := del(context.Background(), acctest.OpenDriver(t, cfg)); err != nil {
				t.Fatal(err)
			}
		},
		Config:           config,
		ConfigPlanChecks: planExpects(addr, plancheck.ResourceActionCreate),
	}
}

// checkServes fetches http://<endpoints[port]>/ of addr until it answers want.
func checkServes(addr, port, want string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[addr]
		if !ok {
			return fmt.Errorf("%s not in state", addr)
		}
		ep := rs.Primary.Attributes["endpoints."+port]
		if ep == "" {
			return fmt.Errorf("%s has no endpoint %q", addr, port)
		}
		var last error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			resp, err := http.Get("http://" + ep + "/")
			if err != nil {
				last = err
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.TrimSpace(string(body)) == want {
				return nil
			}
			last = fmt.Errorf("answered %d %q", resp.StatusCode, body)
		}
		return fmt.Errorf("%s: endpoint %s never served %q: %v", addr, ep, want, last)
	}
}
