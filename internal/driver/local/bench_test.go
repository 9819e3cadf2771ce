package local

import (
	"context"
	"fmt"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// BenchmarkCreateExecDelete measures one sandbox's create (running), one
// exec and delete; `make bench` compares 50 of them with raw bwrap.
func BenchmarkCreateExecDelete(b *testing.B) {
	d := openBench(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench-%d", i)
		if _, err := d.CreateInstance(ctx, testSpec(name)); err != nil {
			b.Fatal(err)
		}
		if res, err := d.Exec(ctx, name, driver.ExecSpec{Command: []string{"true"}}); err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
		if err := d.DeleteInstance(ctx, name); err != nil {
			b.Fatal(err)
		}
	}
}
