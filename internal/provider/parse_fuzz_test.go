package provider

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// FuzzBackendImportID: an accepted `<driver>:<name>[:<endpoint>][?k=v&...]`
// names a known driver and a name, sets every field of the driver's block
// (unset ones null), and the ID written back from them (endpoint and fields
// all in the query) reads back the same; a refused one is named.
func FuzzBackendImportID(f *testing.F) {
	for _, s := range []string{
		"docker:gpu", "local:dev", "docker:b:ssh://u@h:22?ssh_key_file=/k&internal=true", "docker:b:unix:///var/run/docker.sock",
		"incus:i:https://h:8443?project=p", "kubernetes:k:/kubeconfig?namespace=ns", "local:dev:/srv/x?isolation=none",
		"docker", "docker:", ":b", "podman:b", "local:b?colour=red", "docker:b?internal=maybe", "docker:b?internal=1&internal=0",
		"docker:b?%zz", "docker:b:?host=x", "docker:b:tcp://h:1?host=tcp://other:2", "local:a:b:c", "docker:b?host=",
		"local:dev?root=%2Fa%3Fb", "docker:b:x?internal", "docker:b;c", "DOCKER:b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		drv, name, block, err := parseBackendImportID(id)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) {
				t.Fatalf("parseBackendImportID(%q): error %q does not name the ID", id, err)
			}
			return
		}
		fields, ok := handleFields[drv]
		if !ok || name == "" || strings.ContainsAny(name, ":?") || len(block) != len(fields) {
			t.Fatalf("parseBackendImportID(%q) = %q, %q, %v: not a known driver, a name and its block", id, drv, name, block)
		}
		q := url.Values{}
		for _, fd := range fields {
			switch v := block[fd.name].(type) {
			case types.String:
				if !v.IsNull() {
					q.Set(fd.name, v.ValueString())
				}
			case types.Bool:
				if !v.IsNull() {
					q.Set(fd.name, strconv.FormatBool(v.ValueBool()))
				}
			default:
				t.Fatalf("parseBackendImportID(%q): field %s is %T", id, fd.name, v)
			}
		}
		again := drv + ":" + name + "?" + q.Encode()
		drv2, name2, block2, err := parseBackendImportID(again)
		if err != nil || drv2 != drv || name2 != name || !reflect.DeepEqual(block2, block) {
			t.Fatalf("parseBackendImportID(%q) = %q %q %v; written back as %q it reads %q %q %v, %v", id, drv, name, block, again, drv2, name2, block2, err)
		}
	})
}

// FuzzObjectImportID: `<backend import ID>/<name>` (volumes, instances)
// and `<backend import ID>#<name>` (images, whose names hold '/'): an
// accepted ID gives the name after the last separator and a backend
// handle, and the object's state ID (itself an import ID) reads back the
// same backend (driver, name, endpoint) and name. Only local backends: the others may dial at plan.
func FuzzObjectImportID(f *testing.F) {
	for _, s := range []string{
		"local:dev/data", "local:dev:/srv/sb/worker-0", "local:dev#debian:12", "local:dev#ghcr.io/org/img:1",
		"local:dev:/srv/x?isolation=none/v", "local:dev/", "/v", "local:dev", "local:dev#", "local:dev//v",
		"local:dev?isolation=sometimes/v", "local:dev/a/b", "local:dev#a#b", "local:Dev/v", "local:dev:relative/v",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, id string, image bool) {
		sep := "/"
		if image {
			sep = "#"
		}
		i := strings.LastIndex(id, sep)
		if i > 0 {
			if drv, _, _, err := parseBackendImportID(id[:i]); err == nil && drv != driver.Local {
				return
			}
		}
		h, name, diags := parseObjectImportID(context.Background(), id, sep, driver.Secrets{})
		if diags.HasError() {
			if i <= 0 || i == len(id)-1 {
				if !strings.Contains(diags[0].Detail(), fmt.Sprintf("%q", id)) {
					t.Fatalf("import ID %q: %q does not name it", id, diags[0].Detail())
				}
			}
			return
		}
		if name == "" || strings.Contains(name, sep) || !strings.HasSuffix(id, sep+name) {
			t.Fatalf("import ID %q gives the name %q", id, name)
		}
		cfg, diags := ConfigFromHandle(context.Background(), h)
		if diags.HasError() {
			t.Fatalf("import ID %q gives a handle that does not decode: %v", id, diags)
		}
		// The state ID keeps the driver, name and endpoint only (backendID),
		// so other settings (isolation, ...) come back as their defaults.
		state := objectID(cfg, sep, name)
		h2, name2, diags := parseObjectImportID(context.Background(), state, sep, driver.Secrets{})
		cfg2, d2 := ConfigFromHandle(context.Background(), h2)
		diags.Append(d2...)
		if diags.HasError() || name2 != name || backendID(cfg2) != backendID(cfg) {
			t.Fatalf("import ID %q: its state ID %q reads back %v %q, %v; want %v %q", id, state, h2, name2, diags, h, name)
		}
	})
}

// FuzzHandleSettings: the settings of a handle (`key=value` lines here)
// decode into a config whose handle holds exactly the settings given
// (booleans written as "true"); an unknown key is refused by name.
func FuzzHandleSettings(f *testing.F) {
	for _, s := range [][2]string{
		{"docker", "host=ssh://u@h:22\nknown_hosts_file=/kh\ninternal=true"}, {"docker", ""}, {"docker", "colour=red"},
		{"incus", "address=https://h:8443\nproject=p"}, {"local", "root=/srv/x\nisolation=none"},
		{"kubernetes", "kubeconfig=/k\nnamespace=ns"}, {"podman", "host=x"}, {"docker", "internal=yes"}, {"local", "=x"},
	} {
		f.Add(s[0], "b", s[1])
	}
	f.Fuzz(func(t *testing.T, drv, name, text string) {
		if !utf8.ValidString(drv) || !utf8.ValidString(name) || !utf8.ValidString(text) {
			return // handles are Terraform strings, always UTF-8
		}
		settings := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && v != "" {
				settings[k] = v
			}
		}
		cfg, err := ConfigFromSettings(drv, name, settings)
		if err != nil {
			named := false
			for k := range settings {
				named = named || strings.Contains(err.Error(), fmt.Sprintf("%q", k))
			}
			if !named {
				t.Fatalf("ConfigFromSettings(%q, %v): error %q names no key", drv, settings, err)
			}
			return
		}
		if cfg.Driver != drv || cfg.Name != name {
			t.Fatalf("ConfigFromSettings(%q, %q) = %+v", drv, name, cfg)
		}
		if _, known := handleFields[drv]; !known {
			return
		}
		h, diags := HandleFromConfig(cfg)
		if diags.HasError() {
			t.Fatalf("HandleFromConfig(%+v): %v", cfg, diags)
		}
		got := map[string]string{}
		for k, v := range h.Attributes()["settings"].(types.Map).Elements() {
			got[k] = v.(types.String).ValueString()
		}
		want := map[string]string{}
		for k, v := range settings {
			if fd, _ := fieldByName(handleFields[drv], k); !fd.isBool || v == "true" {
				want[k] = v
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("settings %v decode to %+v, whose handle holds %v", settings, cfg, got)
		}
		back, diags := ConfigFromHandle(context.Background(), h)
		if diags.HasError() || !reflect.DeepEqual(back, cfg) {
			t.Fatalf("handle of %+v decodes to %+v, %v", cfg, back, diags)
		}
	})
}

// FuzzResolveDockerHost: a docker.host the plan accepts is one the driver
// can connect with: an ssh:// host parses as the SSH connection, a tcp://
// host has a host and a port, a unix:// host an absolute path. A refused
// host is named in the diagnostic.
func FuzzResolveDockerHost(f *testing.F) {
	for _, s := range []string{
		"unix:///var/run/docker.sock", "tcp://127.0.0.1:2375", "tcp://[::1]:2376", "ssh://ubuntu@gpu-1:22", "ssh://h/run/x.sock",
		"ssh://u:pw@h", "ssh://h:22:22", "ssh://h:0", "ssh://h?x=1", "ssh://h#f", "ssh://", "tcp://h", "unix://rel.sock",
		"npipe:////./pipe/docker", "", "ssh:h", "tcp://10.0.0.1:2375", "ssh://[::1", "SSH://h",
	} {
		f.Add(s)
	}
	env := testEnv(nil)
	f.Fuzz(func(t *testing.T, host string) {
		if host == "" {
			return // the default host
		}
		cfg := driver.Config{Driver: driver.Docker, Name: "b", Docker: &driver.DockerConfig{Host: host, AllowInsecureTCP: true}}
		out, problems := resolveBackend(cfg, env)
		for _, p := range problems {
			if p.warning {
				continue
			}
			// With a password in it, the host is named with the password hidden.
			if p.field == "host" && !strings.Contains(host, "@") && !strings.Contains(p.detail, fmt.Sprintf("%q", host)) {
				t.Fatalf("docker.host %q: %q does not name it", host, p.detail)
			}
			return
		}
		u, err := url.Parse(out.Docker.Host)
		if err != nil {
			t.Fatalf("docker.host %q accepted, but it does not parse: %v", host, err)
		}
		switch u.Scheme {
		case "ssh":
			if _, err := out.Docker.SSHConfig(driver.Secrets{}); err != nil {
				t.Fatalf("docker.host %q accepted at plan, refused by the connection: %v", host, err)
			}
		case "tcp":
			if u.Hostname() == "" || u.Port() == "" {
				t.Fatalf("docker.host %q accepted without a host and port", host)
			}
		case "unix":
			if !strings.HasPrefix(u.Path, "/") {
				t.Fatalf("docker.host %q accepted without an absolute path", host)
			}
		default:
			t.Fatalf("docker.host %q accepted with scheme %q", host, u.Scheme)
		}
	})
}

// FuzzPortsFromLabel: the ports label an engine object carries
// ("name=port/proto,...", written by the drivers) reads back, on import,
// only ports a configuration could hold: a valid port name, a port from 1 to
// 65535, tcp or udp; and the label of those ports reads back the same.
func FuzzPortsFromLabel(f *testing.F) {
	for _, s := range []string{
		"http=8080/tcp,dns=53/udp", "plain=22", "bad,x=y/tcp", "", "a=0/tcp", "a=65536/tcp", "a=-5/tcp", "a=+5/tcp",
		"a=80x/tcp", "a=80/sctp", "a=80/", "=80/tcp", "A=80/tcp", "a=99999999999999999999/tcp", "a=80/tcp/x", "a==80",
		"a=80/tcp,a=81/tcp", " a=80/tcp", "a= 80/tcp",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, label string) {
		ports := portsFromLabel(label)
		var parts []string
		for _, p := range ports {
			if !portNameRegexp.MatchString(p.Name) || p.Port < 1 || p.Port > 65535 || (p.Protocol != "tcp" && p.Protocol != "udp") {
				t.Fatalf("ports label %q reads as %+v", label, p)
			}
			parts = append(parts, fmt.Sprintf("%s=%d/%s", p.Name, p.Port, p.Protocol))
		}
		if again := portsFromLabel(strings.Join(parts, ",")); !reflect.DeepEqual(again, ports) {
			t.Fatalf("ports label %q reads as %v; written back it reads %v", label, ports, again)
		}
		if _, diags := portsValue(ports); diags.HasError() {
			t.Fatalf("ports label %q: %v", label, diags)
		}
	})
}
