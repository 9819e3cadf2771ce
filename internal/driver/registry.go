package driver

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

var (
	factoriesMu sync.RWMutex
	factories   = map[string]Factory{}
)

// Register makes a driver available under name. Driver packages call it from
// init; the provider imports them for that side effect.
func Register(name string, f Factory) {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	factories[name] = f
}

// Registered lists the driver names compiled in.
func Registered() []string {
	factoriesMu.RLock()
	defer factoriesMu.RUnlock()
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Open opens a driver for cfg without sharing.
func Open(ctx context.Context, cfg Config) (Driver, error) {
	factoriesMu.RLock()
	f, ok := factories[cfg.Driver]
	factoriesMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("backend %q: driver %q is not built into this provider (have %v): %w", cfg.Name, cfg.Driver, Registered(), ErrUnsupported)
	}
	return f(ctx, cfg)
}

// Pool caches one Driver per Config.Key() for the life of the provider
// process, so every resource of a backend shares its connection.
type Pool struct {
	mu      sync.Mutex
	drivers map[string]*poolEntry
}

type poolEntry struct {
	once sync.Once
	d    Driver
	err  error
}

func NewPool() *Pool { return &Pool{drivers: map[string]*poolEntry{}} }

// Get returns the shared driver for cfg, opening it on first use. A failed
// open is not cached, so a later call retries.
func (p *Pool) Get(ctx context.Context, cfg Config) (Driver, error) {
	key := cfg.Key()
	p.mu.Lock()
	e, ok := p.drivers[key]
	if !ok {
		e = &poolEntry{}
		p.drivers[key] = e
	}
	p.mu.Unlock()
	e.once.Do(func() { e.d, e.err = Open(ctx, cfg) })
	if e.err != nil {
		p.mu.Lock()
		if p.drivers[key] == e {
			delete(p.drivers, key)
		}
		p.mu.Unlock()
		return nil, e.err
	}
	return e.d, nil
}

// Close closes every driver in the pool.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for k, e := range p.drivers {
		if e.d != nil {
			if err := e.d.Close(); err != nil && first == nil {
				first = err
			}
		}
		delete(p.drivers, k)
	}
	return first
}
