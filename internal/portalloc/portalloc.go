// Package portalloc hands out loopback addresses for the loopback_ip port
// strategy: every sandbox gets its own 127.0.0.x and publishes its ports on
// that address with the same numbers it uses inside, so two sandboxes can
// both serve port 8080 and neither needs a random host port.
//
// The package is pure: the caller supplies the addresses already in use
// (read from the engine, e.g. container labels) and the Allocator adds the
// ones it handed out that the engine does not show yet.
package portalloc

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// ErrExhausted means every address of the range is taken.
var ErrExhausted = errors.New("no free loopback address left")

// Range is an inclusive range of IPv4 addresses.
type Range struct {
	First, Last netip.Addr
}

// Loopback is the default range: 127.0.0.1 is left to the host itself and
// 127.0.0.255 looks like a broadcast address to some tools.
var Loopback = Range{
	First: netip.AddrFrom4([4]byte{127, 0, 0, 2}),
	Last:  netip.AddrFrom4([4]byte{127, 0, 0, 254}),
}

// Contains reports whether a is inside r.
func (r Range) Contains(a netip.Addr) bool {
	return a.Is4() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Pick returns the lowest address of r not in used. Strings in used that are
// not addresses are ignored, so labels edited by hand cannot break allocation.
func Pick(r Range, used []string) (netip.Addr, error) {
	taken := make(map[netip.Addr]bool, len(used))
	for _, s := range used {
		if a, err := netip.ParseAddr(s); err == nil {
			taken[a] = true
		}
	}
	for a := r.First; a.IsValid() && r.Contains(a); a = a.Next() {
		if !taken[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s-%s: %w", r.First, r.Last, ErrExhausted)
}

// Allocator adds in-flight reservations to the engine's view: between picking
// an address and the engine showing it on a new container, another caller in
// this process must not pick it too. Safe for concurrent use.
type Allocator struct {
	Range Range

	mu      sync.Mutex
	pending map[netip.Addr]bool
}

// NewAllocator returns an allocator over r.
func NewAllocator(r Range) *Allocator {
	return &Allocator{Range: r, pending: map[netip.Addr]bool{}}
}

// Reserve picks an address not in used and not reserved by another caller.
// The caller must call release once the engine records the address (or the
// attempt failed); release is idempotent.
func (a *Allocator) Reserve(used []string) (addr netip.Addr, release func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	all := make([]string, 0, len(used)+len(a.pending))
	all = append(all, used...)
	for p := range a.pending {
		all = append(all, p.String())
	}
	addr, err = Pick(a.Range, all)
	if err != nil {
		return netip.Addr{}, func() {}, err
	}
	a.pending[addr] = true
	var once sync.Once
	release = func() {
		once.Do(func() {
			a.mu.Lock()
			delete(a.pending, addr)
			a.mu.Unlock()
		})
	}
	return addr, release, nil
}
