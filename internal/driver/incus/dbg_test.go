package incus_test

import (
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func TestDbgLifetime(t *testing.T) {
	preCheck(t)
	d := openBackend(t, nil)
	ctx := testCtx(t)
	if err := d.EnsureScope(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.DeleteScope(ctx)
	in, err := d.CreateInstance(ctx, driver.InstanceSpec{Name: "x", Image: fixtureImage, Command: []string{"sleep", "3600"}, Running: true, Lifetime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.DeleteInstance(ctx, in.ID)
	time.Sleep(4 * time.Second)
	l, err := d.ListInstances(ctx)
	t.Logf("%+v %v", l, err)
	i, err := d.InspectInstance(ctx, in.ID)
	t.Logf("%+v %v", i, err)
}
