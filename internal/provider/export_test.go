package provider

import (
	"sync"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// FastPathCounts sums how often the server's fast paths answered.
type FastPathCounts struct{ Reads, Plans, Destroys int64 }

// CountingFactories returns provider factories for resource.TestCase and a
// function that sums the fast-path counts of every server they started (the
// acceptance tests live in package provider_test).
func CountingFactories() (map[string]func() (tfprotov6.ProviderServer, error), func() FastPathCounts) {
	var mu sync.Mutex
	var servers []*server
	factories := map[string]func() (tfprotov6.ProviderServer, error){
		"sandbox": func() (tfprotov6.ProviderServer, error) {
			srv, err := NewServer("acctest")()
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			servers = append(servers, srv.(*server))
			return srv, nil
		},
	}
	return factories, func() FastPathCounts {
		mu.Lock()
		defer mu.Unlock()
		var c FastPathCounts
		for _, s := range servers {
			c.Reads += s.fastReads.Load()
			c.Plans += s.fastPlans.Load()
			c.Destroys += s.fastDestroys.Load()
		}
		return c
	}
}
