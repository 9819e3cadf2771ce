package incus

// pull.ref grammar (documented for sandbox_image on Incus):
//
//	[SERVER:]ALIAS[?type=vm]
//
// SERVER is "images" (https://images.linuxcontainers.org, simplestreams),
// an https:// URL of a simplestreams server, or incus+https://HOST:PORT for
// the public images of an Incus server. Without SERVER, "images" is used.
// ALIAS may also be a fingerprint. "?type=vm" selects the virtual-machine
// variant of the image.

import (
	"context"
	"fmt"
	"strings"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// DefaultImageServer is what the "images:" prefix names.
const DefaultImageServer = "https://images.linuxcontainers.org"

// Image server protocols.
const (
	protoSimpleStreams = "simplestreams"
	protoIncus         = "incus"
)

// pullRef is a parsed pull.ref.
type pullRef struct {
	Server   string
	Protocol string
	Alias    string
	Type     string // "container" | "virtual-machine"
}

func parsePullRef(ref string) (pullRef, error) {
	out := pullRef{Server: DefaultImageServer, Protocol: protoSimpleStreams, Type: string(api.InstanceTypeContainer)}
	rest, query, _ := strings.Cut(ref, "?")
	switch query {
	case "":
	case "type=vm", "type=virtual-machine":
		out.Type = string(api.InstanceTypeVM)
	case "type=container":
	default:
		return out, fmt.Errorf("pull ref %q: unknown option %q (only ?type=vm)", ref, query)
	}
	switch {
	case strings.HasPrefix(rest, "images:"):
		out.Alias = strings.TrimPrefix(rest, "images:")
	case strings.HasPrefix(rest, "https://"), strings.HasPrefix(rest, "incus+https://"):
		server, alias, ok := splitServer(rest)
		if !ok {
			return out, fmt.Errorf("pull ref %q: want URL:ALIAS", ref)
		}
		out.Server, out.Alias = server, alias
		if strings.HasPrefix(server, "incus+") {
			out.Server, out.Protocol = strings.TrimPrefix(server, "incus+"), protoIncus
		}
	default:
		out.Alias = rest
	}
	if out.Alias == "" {
		return out, fmt.Errorf("pull ref %q: no image alias", ref)
	}
	return out, nil
}

// splitServer splits "URL:ALIAS" at the last colon (so an alias given
// after a URL cannot itself contain a colon).
func splitServer(s string) (server, alias string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= strings.Index(s, "://")+2 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// connectImageServer opens the source server (system CAs verify it).
func connectImageServer(ctx context.Context, r pullRef) (incus.ImageServer, error) {
	args := &incus.ConnectionArgs{UserAgent: userAgent}
	if r.Protocol == protoIncus {
		return incus.ConnectPublicIncusWithContext(ctx, r.Server, args)
	}
	return incus.ConnectSimpleStreams(r.Server, args)
}

// pullImage copies the image into the project unless it is already there.
func (d *Driver) pullImage(ctx context.Context, c incus.InstanceServer, spec driver.ImageSpec) (string, error) {
	ref, err := parsePullRef(spec.Pull.Ref)
	if err != nil {
		return "", err
	}
	src, err := connectImageServer(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("image server %s: %w", ref.Server, err)
	}
	defer src.Disconnect()
	img, err := sourceImage(src, ref)
	if err != nil {
		return "", err
	}
	if ok, err := haveImage(c, img.Fingerprint); err != nil || ok {
		return img.Fingerprint, err
	}
	op, err := c.CopyImage(src, *img, copyArgs(ref))
	if err != nil {
		return "", err
	}
	if err := waitRemote(ctx, op); err != nil {
		return "", fmt.Errorf("copy from %s: %w", ref.Server, err)
	}
	return img.Fingerprint, nil
}

// sourceImage resolves the alias (of the wanted type) or a fingerprint.
func sourceImage(src incus.ImageServer, ref pullRef) (*api.Image, error) {
	fp := ref.Alias
	if alias, _, err := src.GetImageAliasType(ref.Type, ref.Alias); err == nil {
		fp = alias.Target
	}
	img, _, err := src.GetImage(fp)
	if err != nil {
		return nil, fmt.Errorf("image %q (%s) on %s: %w", ref.Alias, ref.Type, ref.Server, err)
	}
	return img, nil
}

// copyArgs is the copy request: no aliases (EnsureImage sets ours), no
// auto-update (the provider decides when an image changes).
func copyArgs(ref pullRef) *incus.ImageCopyArgs {
	return &incus.ImageCopyArgs{Type: ref.Type, Mode: "pull"}
}

// waitRemote waits for a remote operation, cancelling it if ctx ends.
func waitRemote(ctx context.Context, op incus.RemoteOperation) error {
	done := make(chan error, 1)
	go func() { done <- op.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = op.CancelTarget()
		return ctx.Err()
	}
}
