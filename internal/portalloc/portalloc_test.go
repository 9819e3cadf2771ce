package portalloc

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
)

func TestPickLowestFree(t *testing.T) {
	got, err := Pick(Loopback, []string{"127.0.0.2", "127.0.0.4", "garbage", ""})
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "127.0.0.3" {
		t.Fatalf("got %s, want 127.0.0.3", got)
	}
}

func TestPickEmpty(t *testing.T) {
	got, err := Pick(Loopback, nil)
	if err != nil || got.String() != "127.0.0.2" {
		t.Fatalf("got %s, %v", got, err)
	}
}

func TestPickExhausted(t *testing.T) {
	var used []string
	for a := Loopback.First; Loopback.Contains(a); a = a.Next() {
		used = append(used, a.String())
	}
	if len(used) != 253 {
		t.Fatalf("range has %d addresses, want 253", len(used))
	}
	if _, err := Pick(Loopback, used); !errors.Is(err, ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted", err)
	}
}

func TestRangeContains(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1": false, "127.0.0.2": true, "127.0.0.254": true,
		"127.0.0.255": false, "10.0.0.2": false, "::1": false,
	} {
		if got := Loopback.Contains(netip.MustParseAddr(s)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestAllocatorNeverTwiceConcurrently(t *testing.T) {
	a := NewAllocator(Loopback)
	var mu sync.Mutex
	seen := map[netip.Addr]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr, _, err := a.Reserve([]string{"127.0.0.2"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[addr] {
				t.Errorf("%s handed out twice", addr)
			}
			if addr.String() == "127.0.0.2" {
				t.Errorf("used address handed out")
			}
			seen[addr] = true
		}()
	}
	wg.Wait()
}

func TestAllocatorReleaseFreesAddress(t *testing.T) {
	a := NewAllocator(Loopback)
	first, release, err := a.Reserve(nil)
	if err != nil {
		t.Fatal(err)
	}
	second, _, _ := a.Reserve(nil)
	if first == second {
		t.Fatal("same address while reserved")
	}
	release()
	release() // idempotent
	again, _, _ := a.Reserve(nil)
	if again != first {
		t.Fatalf("got %s after release, want %s", again, first)
	}
}
