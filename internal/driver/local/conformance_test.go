package local

import (
	"os"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/drivertest"
)

func TestConformanceBwrap(t *testing.T) {
	precheck(t, driver.IsolationBwrap)
	skip := map[string]string{}
	if os.Geteuid() != 0 {
		skip[drivertest.TestExecEnv] = "rootless: sandboxes run as the caller, no other user"
		skip[drivertest.TestCreateStopped] = "rootless: no overlayfs, the rootfs is read-only and the test writes /etc"
		skip[drivertest.TestFiles] = "rootless: no overlayfs, the rootfs is read-only and the test writes /opt"
		skip[drivertest.TestServiceLinks] = "rootless: sandboxes run as the caller, no other user"
	}
	drivertest.Run(t, drivertest.Harness{
		Open:  func(t *testing.T) driver.Driver { return openTest(t, driver.IsolationBwrap) },
		Image: testImage,
		Skip:  skip,
	})
}

func TestConformanceNone(t *testing.T) {
	precheck(t, driver.IsolationNone)
	drivertest.Run(t, drivertest.Harness{
		Open:  func(t *testing.T) driver.Driver { return openTest(t, driver.IsolationNone) },
		Image: HostImage,
		Skip: map[string]string{
			drivertest.TestExecEnv:        "without a mount namespace the workdir is the workspace's host path, not /workspace",
			drivertest.TestExecPrivileges: "without isolation processes keep the provider's privileges and PID 1 is the host's init",
			drivertest.TestFiles:          "without isolation files can only be written under the workdir; the test writes /opt and /etc",
			drivertest.TestCreateStopped:  "without isolation files can only be written under the workdir; the test writes /etc",
			drivertest.TestVolumes:        "without isolation volumes appear only under the workdir; the test mounts /data",
			drivertest.TestPorts:          "without isolation commands use the host's programs; the test runs busybox httpd and nc by applet name",
			drivertest.TestLimits:         "without a mount namespace /sys/fs/cgroup inside is the host's; limits are checked in TestNoneIsolation",
			drivertest.TestInitializer:    "without isolation the agent is not at /.sandbox/sandbox-agent and files can only be written under the workdir",
			drivertest.TestServiceLinks:   "without isolation there is no state directory of the sandbox's own: the agent's files are the host's",
		},
	})
}
