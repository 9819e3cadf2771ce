package provider

import (
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
)

// backendModel is sandbox_backend's state.
type backendModel struct {
	ID            types.String `tfsdk:"id"`
	Name          types.String `tfsdk:"name"`
	Docker        types.Object `tfsdk:"docker"`
	Incus         types.Object `tfsdk:"incus"`
	Kubernetes    types.Object `tfsdk:"kubernetes"`
	Local         types.Object `tfsdk:"local"`
	Handle        types.Object `tfsdk:"handle"`
	Driver        types.String `tfsdk:"driver"`
	EngineVersion types.String `tfsdk:"engine_version"`
	OS            types.String `tfsdk:"os"`
	Arch          types.String `tfsdk:"arch"`
	CPUs          types.Int64  `tfsdk:"cpus"`
	MemoryBytes   types.Int64  `tfsdk:"memory_bytes"`
	Capabilities  types.Set    `tfsdk:"capabilities"`
}

// blocks returns the driver blocks by driver name.
func (m *backendModel) blocks() map[string]*types.Object {
	return map[string]*types.Object{driver.Docker: &m.Docker, driver.Incus: &m.Incus, driver.Kubernetes: &m.Kubernetes, driver.Local: &m.Local}
}

var (
	sshFingerprintRe   = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}=?$`)
	incusFingerprintRe = regexp.MustCompile(`^([0-9a-fA-F]{64}|SHA256:[A-Za-z0-9+/]{43}=?)$`)
	jumpHostRe         = regexp.MustCompile(`^([^@\s/]+@)?[^@\s/:]+(:[0-9]{1,5})?$`)
	envNameRe          = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// backendFieldValidators adds checks to the handle fields as sandbox_backend
// inputs; every string must also be non-empty (null means the default).
var backendFieldValidators = map[string][]validator.String{
	"port_strategy":          {stringvalidator.OneOf(enumStrings(portStrategyValues)...)},
	"isolation":              {stringvalidator.OneOf(enumStrings(isolationValues)...)},
	"host_key_fingerprint":   {stringvalidator.RegexMatches(sshFingerprintRe, "must be an OpenSSH SHA256 fingerprint, as `ssh-keygen -lf` prints it (SHA256:...)")},
	"server_fingerprint":     {stringvalidator.RegexMatches(incusFingerprintRe, "must be the certificate's SHA-256 fingerprint: 64 hex digits, or SHA256:<base64>")},
	"ssh_jump_host":          {stringvalidator.RegexMatches(jumpHostRe, "must be `[user@]host[:port]`")},
	"ssh_key_passphrase_env": {stringvalidator.RegexMatches(envNameRe, "must be an environment variable name")},
	"trust_token_env":        {stringvalidator.RegexMatches(envNameRe, "must be an environment variable name (the token itself must not be written here)")},
	"remote_socket":          {stringvalidator.RegexMatches(regexp.MustCompile(`^/`), "must be an absolute socket path on the SSH host")},
	"namespace":              {nameValidator{}},
	"project":                {nameValidator{}},
}

// backendBlockAttributes is one driver block of sandbox_backend, built from
// the same field list as the handle.
func backendBlockAttributes(drv string) map[string]schema.Attribute {
	out := map[string]schema.Attribute{}
	for _, f := range handleFields[drv] {
		if f.isBool {
			b := schema.BoolAttribute{Optional: true, Description: f.description}
			if f.name == "internal" { // a network's egress cannot change in place
				b.PlanModifiers = []planmodifier.Bool{replaceBoolUnlessDefault(false)}
			}
			out[f.name] = b
			continue
		}
		vs := append([]validator.String{stringvalidator.LengthAtLeast(1)}, backendFieldValidators[f.name]...)
		out[f.name] = schema.StringAttribute{Optional: true, Description: f.description + backendDefaultDoc[drv+"."+f.name], Validators: vs}
	}
	return out
}

// backendDefaultDoc documents the defaults resolveBackend applies.
var backendDefaultDoc = map[string]string{
	"docker.host":             " Defaults to `DOCKER_HOST`, else `" + DefaultDockerHost + "`.",
	"docker.known_hosts_file": " Defaults to `~/.ssh/known_hosts` for `ssh://` hosts without `host_key_fingerprint`.",
	"docker.advertise_host":   " Defaults to `127.0.0.1` for `unix://`, else the host of `host` (for `ssh://`, the SSH host).",
	"docker.port_strategy":    " Defaults to `loopback_ip` on the local socket (`unix://`) and `dynamic` on remote hosts (`tcp://`, `ssh://`), where 127.0.0.x addresses are out of reach.",
	"docker.tls_ca_file":      " With `host` from `DOCKER_HOST`, `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` fill the three TLS files.",
	"incus.project":           " Defaults to the backend name.",
	"incus.advertise_host":    " Defaults to `127.0.0.1` for the local server, else the host of `address`.",
	"incus.known_hosts_file":  " Defaults to `~/.ssh/known_hosts` for `ssh://` addresses without `host_key_fingerprint`.",
	"incus.port_strategy":     " Defaults to `loopback_ip` for the local server, else `dynamic`.",
	"kubernetes.kubeconfig":   " Defaults to the first file of `KUBECONFIG`, else `~/.kube/config`.",
	"kubernetes.namespace":    " Defaults to the backend name.",
	"local.root":              " Defaults to `$XDG_DATA_HOME/terraform-provider-sandbox`, else `~/.local/share/terraform-provider-sandbox`.",
	"local.isolation":         " Defaults to `bwrap`.",
}

const backendDescription = "A place where sandboxes run: a Docker Engine, an Incus server, a Kubernetes namespace or a " +
	"directory on this machine. The provider creates the backend's scope there (a network, project, namespace or " +
	"directory) and exposes `handle`, which every other resource takes as `backend`.\n\n" +
	"Set at most one of `docker`, `incus`, `kubernetes` and `local`; with none, the backend is `local` with its defaults. " +
	"Paths may start with `~/` and are stored absolute. The handle holds no secret: keys come from files, ssh-agent, " +
	"environment variables or the provider's `ssh_private_key`.\n\n" +
	"Import ID: `<driver>:<name>[:<endpoint>][?<field>=<value>&...]`, where endpoint is the docker `host`, incus " +
	"`address`, kubernetes `kubeconfig` or local `root`, and each query field sets that attribute of the driver block, " +
	"e.g. `docker:gpu:ssh://ubuntu@gpu-1:22?ssh_key_file=~/.ssh/id_ed25519` or `local:dev`."

func backendSchema() schema.Schema {
	attrs := map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, Description: "`<driver>:<name>:<endpoint>`.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"name": schema.StringAttribute{Required: true, Validators: []validator.String{nameValidator{}},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			Description:   "Name of the backend, its scope on the engine (network `sandbox-<name>`, project, namespace or directory): " + names.NameRule + "."},
		"handle": schema.SingleNestedAttribute{Computed: true, Attributes: handleAttributes(true),
			Description: "Everything needed to reach this backend, resolved with defaults and without secrets. Pass it as `backend` to other resources. Known at plan time when the configuration is."},
		"driver":         schema.StringAttribute{Computed: true, Description: "The driver in use: `docker`, `incus`, `kubernetes` or `local`."},
		"engine_version": computedString("Version of the engine, as it reports it."),
		"os":             computedString("Operating system of the engine host."),
		"arch":           computedString("CPU architecture of the engine host (Go naming, e.g. `amd64`)."),
		"cpus": schema.Int64Attribute{Computed: true, Description: "CPUs of the engine host.",
			PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()}},
		"memory_bytes": schema.Int64Attribute{Computed: true, Description: "Memory of the engine host in bytes.",
			PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()}},
		"capabilities": schema.SetAttribute{Computed: true, ElementType: types.StringType,
			PlanModifiers: []planmodifier.Set{setplanmodifier.UseStateForUnknown()},
			Description:   "What the backend can do, e.g. `containers`, `vms`, `image_build`, `volumes`, `ports`."},
	}
	for _, d := range handleDrivers {
		attrs[d] = schema.SingleNestedAttribute{Optional: true, Attributes: backendBlockAttributes(d),
			Description: fmt.Sprintf("Settings of a `%s` backend. Conflicts with the other driver blocks.", d)}
	}
	return schema.Schema{Description: backendDescription, Attributes: attrs}
}

func computedString(desc string) schema.StringAttribute {
	return schema.StringAttribute{Computed: true, Description: desc,
		PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
}
