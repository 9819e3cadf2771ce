package driver

import (
	"reflect"
	"sort"
	"testing"
)

func problemAttrs(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		s := p.Attribute
		if p.Warning {
			s += "(warning)"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func TestCheckInstance(t *testing.T) {
	docker := Config{Driver: Docker, Name: "b", Docker: &DockerConfig{Host: "unix:///var/run/docker.sock"}}
	internal := Config{Driver: Docker, Name: "b", Docker: &DockerConfig{Internal: true}}
	bwrap := Config{Driver: Local, Name: "b", Local: &LocalConfig{Root: "/r", Isolation: IsolationBwrap}}
	plain := Config{Driver: Local, Name: "b", Local: &LocalConfig{Root: "/r", Isolation: IsolationNone}}
	incus := Config{Driver: Incus, Name: "b", Incus: &IncusConfig{}}
	ports := []PortSpec{{Name: "http", Port: 80, Protocol: "tcp"}}
	cases := []struct {
		name string
		cfg  Config
		spec InstanceSpec
		want []string
	}{
		{"docker container", docker, InstanceSpec{Type: TypeContainer, Network: NetworkIsolated, Ports: ports, MemoryBytes: 1, CPUs: 1, PidsLimit: 1}, nil},
		{"docker vm", docker, InstanceSpec{Type: TypeVM}, []string{"type"}},
		{"local vm", bwrap, InstanceSpec{Type: TypeVM}, []string{"type"}},
		{"incus vm", incus, InstanceSpec{Type: TypeVM, DiskBytes: 1, CPUs: 0.5, MemoryBytes: 1, Lifetime: 1}, nil},
		{"incus vm, container-only settings", incus, InstanceSpec{Type: TypeVM, Command: []string{"sleep", "1"},
			PidsLimit: 5, Security: Security{ReadOnlyRootfs: true}}, []string{"command", "pids_limit", "security"}},
		{"incus container, same settings", incus, InstanceSpec{Type: TypeContainer, Command: []string{"sleep", "1"},
			PidsLimit: 5, Security: Security{ReadOnlyRootfs: true}, User: "1000:1000"}, nil},
		{"incus system container with lifetime", incus, InstanceSpec{Lifetime: 1}, nil},
		{"incus user name", incus, InstanceSpec{User: "www-data"}, []string{"user"}},
		{"incus user uid:name", incus, InstanceSpec{User: "1000:staff"}, []string{"user"}},
		{"incus user uid", incus, InstanceSpec{User: "1000"}, nil},
		{"docker user name", docker, InstanceSpec{User: "www-data"}, nil},
		{"ports without network", docker, InstanceSpec{Network: NetworkNone, Ports: ports}, []string{"ports"}},
		{"ports on internal docker", internal, InstanceSpec{Network: NetworkIsolated, Ports: ports}, []string{"ports"}},
		{"ports on local isolated", bwrap, InstanceSpec{Network: NetworkIsolated, Ports: ports}, []string{"ports"}},
		{"ports on local bridge", bwrap, InstanceSpec{Network: NetworkBridge, Ports: ports}, nil},
		{"disk on local", bwrap, InstanceSpec{DiskBytes: 1 << 30}, []string{"disk"}},
		{"local without isolation", plain, InstanceSpec{Network: NetworkBridge}, []string{"backend(warning)"}},
		{"local without isolation, isolated network", plain, InstanceSpec{Network: NetworkIsolated, PidsLimit: 5},
			[]string{"backend(warning)", "network"}},
		{"unknown driver", Config{Driver: "nope"}, InstanceSpec{Type: TypeVM}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := problemAttrs(CheckInstance(c.cfg, c.spec)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("CheckInstance = %v, want %v", got, c.want)
			}
		})
	}
}
