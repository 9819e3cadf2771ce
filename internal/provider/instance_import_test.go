package provider_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccInstance_importPlansNothing: a sandbox without files imports with
// the settings the engine keeps (command, env, workdir, user, network,
// ports, limits, lifetime), so ImportStateVerify needs no ignores but
// `timeouts`, and an import block with the same configuration plans a
// no-op import instead of a replacement.
func TestAccInstance_importPlansNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		cfg := e.config(backendOpts{}, `command  = ["sleep", "3600"]
  env      = { GREETING = "hi", TASK = "import" }
  workdir  = "/srv"
  user     = "1000:1000"
  network  = "bridge"
  ports    = [{ name = "http", port = 18089 }]
  cpus     = 0.5
  memory   = "64MiB"
  lifetime = "2h"`)
		runInstanceTest(t, e,
			resource.TestStep{Config: cfg},
			resource.TestStep{
				ResourceName:            instanceAddr,
				ImportState:             true,
				ImportStateIdFunc:       importID(e.name),
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			resource.TestStep{
				Config:            cfg,
				ResourceName:      instanceAddr,
				ImportState:       true,
				ImportStateKind:   resource.ImportBlockWithID,
				ImportStateIdFunc: importID(e.name),
			},
		)
	})
}
