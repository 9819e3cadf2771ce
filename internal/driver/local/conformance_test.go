package local

import (
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/drivertest"
)

func TestConformanceBwrap(t *testing.T) {
	precheck(t, driver.IsolationBwrap)
	drivertest.Run(t, drivertest.Harness{
		Open:  func(t *testing.T) driver.Driver { return openTest(t, driver.IsolationBwrap) },
		Image: testImage,
	})
}
