package provider

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// fakeDriver counts ListInstances calls; the embedded nil interface makes
// any other call panic, which the tests here must not make.
type fakeDriver struct {
	driver.Driver
	lists   atomic.Int64
	release chan struct{} // when non-nil, ListInstances waits for it
	fail    atomic.Bool
}

func (f *fakeDriver) ListInstances(ctx context.Context) ([]driver.Instance, error) {
	f.lists.Add(1)
	if f.release != nil {
		<-f.release
	}
	if f.fail.Load() {
		return nil, errors.New("engine down")
	}
	return []driver.Instance{{ID: "a", Name: "one"}, {ID: "b", Name: "two"}}, nil
}

func (f *fakeDriver) DeleteInstance(ctx context.Context, id string) error { return nil }
func (f *fakeDriver) Close() error                                        { return nil }

// registerFake registers a fresh fake under a unique driver name.
func registerFake(t *testing.T) (*fakeDriver, driver.Config) {
	t.Helper()
	f := &fakeDriver{}
	name := "fake-" + t.Name()
	driver.Register(name, func(context.Context, driver.Config) (driver.Driver, error) { return f, nil })
	return f, driver.Config{Driver: name, Name: "b1"}
}

func TestInstancesSharesOneListAmongConcurrentReads(t *testing.T) {
	f, cfg := registerFake(t)
	f.release = make(chan struct{})
	pd := NewProviderData(driver.NewPool(), nil, driver.Secrets{})

	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := pd.Instances(context.Background(), cfg)
			if err == nil && len(got) != 2 {
				err = errors.New("want 2 instances")
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(f.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.lists.Load(); n != 1 {
		t.Fatalf("ListInstances called %d times, want 1", n)
	}
}

func TestInstancesExpiresAfterTTL(t *testing.T) {
	f, cfg := registerFake(t)
	pd := NewProviderData(driver.NewPool(), nil, driver.Secrets{})
	now := time.Now()
	pd.snapshots.now = func() time.Time { return now }

	mustList(t, pd, cfg)
	mustList(t, pd, cfg)
	if n := f.lists.Load(); n != 1 {
		t.Fatalf("within TTL: %d lists, want 1", n)
	}
	now = now.Add(snapshotTTL + time.Millisecond)
	mustList(t, pd, cfg)
	if n := f.lists.Load(); n != 2 {
		t.Fatalf("after TTL: %d lists, want 2", n)
	}
}

func TestInstancesInvalidatedByMutationThroughDriver(t *testing.T) {
	f, cfg := registerFake(t)
	pd := NewProviderData(driver.NewPool(), nil, driver.Secrets{})

	mustList(t, pd, cfg)
	c := cfg
	d, err := pd.DriverFor(context.Background(), &c)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteInstance(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	mustList(t, pd, cfg)
	if n := f.lists.Load(); n != 2 {
		t.Fatalf("after a mutation: %d lists, want 2", n)
	}
}

func TestInstancesRacingListIsNotCached(t *testing.T) {
	f, cfg := registerFake(t)
	f.release = make(chan struct{})
	pd := NewProviderData(driver.NewPool(), nil, driver.Secrets{})

	done := make(chan struct{})
	go func() { mustList(t, pd, cfg); close(done) }()
	time.Sleep(20 * time.Millisecond)
	pd.InvalidateInstances(cfg) // a mutation while the list is in flight
	close(f.release)
	<-done
	f.release = nil
	mustList(t, pd, cfg)
	if n := f.lists.Load(); n != 2 {
		t.Fatalf("a list that raced a mutation was cached: %d lists, want 2", n)
	}
}

func TestInstancesErrorIsNotCached(t *testing.T) {
	f, cfg := registerFake(t)
	pd := NewProviderData(driver.NewPool(), nil, driver.Secrets{})
	f.fail.Store(true)
	if _, err := pd.Instances(context.Background(), cfg); err == nil {
		t.Fatal("want the engine's error")
	}
	f.fail.Store(false)
	mustList(t, pd, cfg)
	if n := f.lists.Load(); n != 2 {
		t.Fatalf("an error was cached: %d lists, want 2", n)
	}
}

func TestInstancesSeparatePerBackend(t *testing.T) {
	f, cfg := registerFake(t)
	pd := NewProviderData(driver.NewPool(), nil, driver.Secrets{})
	other := cfg
	other.Name = "b2"
	mustList(t, pd, cfg)
	mustList(t, pd, other)
	pd.InvalidateInstances(other)
	mustList(t, pd, cfg)
	if n := f.lists.Load(); n != 2 {
		t.Fatalf("%d lists, want 2 (one per backend, b1 still cached)", n)
	}
}

func mustList(t *testing.T, pd *ProviderData, cfg driver.Config) {
	t.Helper()
	got, err := pd.Instances(context.Background(), cfg)
	if err != nil {
		t.Error(err)
		return
	}
	if got["a"].Name != "one" || got["b"].Name != "two" {
		t.Errorf("unexpected snapshot %v", got)
	}
}
