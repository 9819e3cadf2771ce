package provider

import (
	"context"
	"sync"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// snapshotTTL bounds how stale a shared instance list may be. Terraform reads
// all instances of a refresh within a moment of each other, so a short TTL
// lets them share one list while a later refresh sees fresh state.
const snapshotTTL = 2 * time.Second

// snapshotCache holds one ListInstances result per backend key. Concurrent
// callers share one in-flight list (single flight); a mutation bumps the
// key's generation so a list that raced with it is returned but not kept.
type snapshotCache struct {
	mu      sync.Mutex
	entries map[string]*snapshot
	gens    map[string]uint64
	now     func() time.Time
}

type snapshot struct {
	done  chan struct{} // closed when the list finished
	gen   uint64
	taken time.Time
	items map[string]driver.Instance
	err   error
}

func newSnapshotCache() *snapshotCache {
	return &snapshotCache{entries: map[string]*snapshot{}, gens: map[string]uint64{}, now: time.Now}
}

// get returns the cached list for key, joins a list in flight, or runs list.
// Errors are shared with the callers that waited but never cached.
func (c *snapshotCache) get(ctx context.Context, key string, list func(context.Context) ([]driver.Instance, error)) (map[string]driver.Instance, error) {
	c.mu.Lock()
	s, ok := c.entries[key]
	if ok && !c.usable(s, key) {
		ok = false
	}
	if !ok {
		s = &snapshot{done: make(chan struct{}), gen: c.gens[key]}
		c.entries[key] = s
		c.mu.Unlock()
		c.fill(ctx, key, s, list)
	} else {
		c.mu.Unlock()
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.items, s.err
}

// usable reports whether s may be served: in flight, or finished without
// error, of the current generation and younger than the TTL. Caller holds mu.
func (c *snapshotCache) usable(s *snapshot, key string) bool {
	if s.gen != c.gens[key] {
		return false
	}
	select {
	case <-s.done:
		return s.err == nil && c.now().Sub(s.taken) < snapshotTTL
	default:
		return true
	}
}

// fill runs the list for s and publishes the result.
func (c *snapshotCache) fill(ctx context.Context, key string, s *snapshot, list func(context.Context) ([]driver.Instance, error)) {
	insts, err := list(ctx)
	items := make(map[string]driver.Instance, len(insts))
	for _, in := range insts {
		items[in.ID] = in
	}
	c.mu.Lock()
	s.items, s.err, s.taken = items, err, c.now()
	if err != nil && c.entries[key] == s {
		delete(c.entries, key)
	}
	c.mu.Unlock()
	close(s.done)
}

// invalidate drops key's snapshot and any list in flight for it.
func (c *snapshotCache) invalidate(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[key]++
	delete(c.entries, key)
}
