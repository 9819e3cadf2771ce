package provider

// The backend handle: a computed object on sandbox_backend that carries
// everything needed to reach the backend (and no secret), passed by the user
// to every other resource as `backend = sandbox_backend.X.handle`.
//
// Its shape is {driver, name, settings}: settings holds the fields of the
// driver's block of driver.Config that are set. The per-driver field lists
// below are the single source for the driver blocks of sandbox_backend, the
// keys of a handle's settings and the conversion to driver.Config (through
// the JSON tags of the driver config structs, which are the attribute names).

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

type handleField struct {
	name        string
	isBool      bool
	description string
	// identity marks the fields that say which engine and scope a backend
	// is; a change of one of them is a different backend (see backendIdentity).
	identity bool
}

// handleFields lists, per driver block, the attributes a handle records.
var handleFields = map[string][]handleField{
	driver.Docker: {
		{name: "host", identity: true, description: "Docker Engine address: `unix:///PATH`, `tcp://HOST:PORT` or " +
			"`ssh://[USER@]HOST[:PORT][/SOCKET]`. Over `ssh://` the provider holds one SSH connection per backend " +
			"(golang.org/x/crypto/ssh: neither an `ssh` binary nor a docker CLI is needed on either side), shared by " +
			"every resource and concurrent call, kept alive and redialled transparently when it drops; each API " +
			"connection is forwarded to the remote Docker socket. Images are built from a context uploaded through " +
			"the API, and volumes and files are uploaded the same way, so no local path needs to exist on the remote host."},
		{name: "ssh_key_file", description: "Private key file for `ssh://` hosts. Authentication offers, in this order and " +
			"in one attempt, this key, then the keys of the ssh-agent at `SSH_AUTH_SOCK`, then the provider's " +
			"`ssh_private_key` (or `SANDBOX_SSH_PRIVATE_KEY`); the server takes the first one it accepts."},
		{name: "ssh_key_passphrase_env", description: "Name of the environment variable that holds the passphrase of an " +
			"encrypted `ssh_key_file`. The passphrase itself never appears in configuration or state."},
		{name: "known_hosts_file", description: "OpenSSH known_hosts file that verifies the SSH host key (and that of " +
			"`ssh_jump_host`); host keys are always verified, never trusted silently. Hashed entries (`ssh-keygen -H`) " +
			"and entries for non-default ports (`[host]:2222`) are understood, `@revoked` keys are refused. An unknown " +
			"or changed key fails with the fingerprint the server offered and the line or setting that trusts it."},
		{name: "host_key_fingerprint", description: "SHA256 fingerprint (`SHA256:...`, as `ssh-keygen -lf` prints it) " +
			"the SSH host key must have; it replaces `known_hosts_file` for the target host. When unset, the plan records " +
			"in `handle.settings.host_key_fingerprint` the key known_hosts trusts for the host (asking the host only when " +
			"known_hosts holds several keys for it or none): every resource then verifies exactly that key, and " +
			"trusting another key shows in the plan as a change of the handle. An unknown host fails the plan with " +
			"the fingerprint it offered and how to trust it."},
		{name: "ssh_jump_host", description: "Bastion `[user@]host[:port]` the SSH connection goes through, for hosts " +
			"that are not directly reachable. Its user defaults to the target's and its port to 22; it is authenticated " +
			"with the same keys and verified against `known_hosts_file`."},
		{name: "remote_socket", description: "Docker (or Podman) socket path on the SSH host. Defaults to the path of " +
			"an `ssh://` `host` (e.g. `ssh://me@host/run/user/1000/podman/podman.sock`), else `/var/run/docker.sock`."},
		{name: "tls_ca_file", description: "CA certificate (PEM) that signs the daemon's certificate, for `tcp://` with " +
			"TLS. The daemon's certificate must name the host of `host` (the server name is verified)."},
		{name: "tls_cert_file", description: "Client certificate (PEM) for a daemon started with `--tlsverify`; set together with `tls_key_file`."},
		{name: "tls_key_file", description: "Private key (PEM) of `tls_cert_file`."},
		{name: "allow_insecure_tcp", isBool: true, description: "Allow plain `tcp://` without TLS to a host that is not " +
			"loopback. Without it such a host is refused at plan time; with it the plan warns, since anyone on the " +
			"network path could take over the engine. Prefer TLS or `ssh://`."},
		{name: "advertise_host", description: "Host name or address where published ports are reached: instance " +
			"`endpoints` are `<advertise_host>:<port>` (or the sandbox's 127.0.0.x under `loopback_ip`). Set it when " +
			"the engine's ports are reached at another address than `host` (a public or VPN address)."},
		{name: "port_strategy", description: "How ports are published: " + enumDoc(portStrategyValues) + "."},
		{name: "internal", isBool: true, description: "Whether the backend network has no egress."},
	},
	driver.Incus: {
		{name: "address", identity: true, description: "Incus server: unset (or `unix:///PATH`) for the local socket; " +
			"`https://HOST:8443` for a remote server (with `client_cert_file` and `client_key_file`, the server pinned by " +
			"`server_cert_file` or `server_fingerprint`); `ssh://USER@HOST[:PORT][/SOCKET]` for a server's unix socket " +
			"(default `" + driver.IncusDefaultRemoteSocket + "`) reached through SSH, which needs no HTTPS listener. " +
			"A cluster is reached through any member's address (published ports are on the member that runs the instance)."},
		{name: "client_cert_file", description: "Client certificate (PEM) for an `https://` server. It must be in the " +
			"server's trust store (`incus config trust add-certificate`), or be added on first contact with `trust_token_env`."},
		{name: "client_key_file", description: "Private key (PEM) of `client_cert_file`."},
		{name: "server_cert_file", description: "The `https://` server's certificate (PEM, as `incus info` prints it), " +
			"pinned: the server must present exactly this certificate, and one it signed or a public CA signed is refused. " +
			"Without it or `server_fingerprint` the server must present a certificate " +
			"the system CAs accept: a self-signed certificate is never trusted silently."},
		{name: "server_fingerprint", description: "SHA-256 fingerprint the `https://` server's certificate must have " +
			"(64 hex digits as `incus info` prints it, or `SHA256:<base64>`): a pin like `server_cert_file`. With both, " +
			"they must name the same certificate."},
		{name: "trust_token_env", description: "Name of an environment variable holding a trust token made on the server " +
			"with `incus config trust add NAME`. On first contact, when the server does not trust `client_cert_file` yet, " +
			"the provider presents the token, which adds the certificate to the server's trust store; later runs need " +
			"no token. The token is a secret: only the variable's name is kept in state."},
		{name: "ssh_key_file", description: "Private key for an `ssh://` address; else ssh-agent, else the provider's " +
			"`ssh_private_key`. The SSH user needs access to the Incus socket (root or the `incus-admin` group)."},
		{name: "known_hosts_file", description: "known_hosts file that verifies the SSH host key of an `ssh://` address; " +
			"host keys are always verified."},
		{name: "host_key_fingerprint", description: "OpenSSH SHA256 fingerprint the SSH host key of an `ssh://` address " +
			"must have, instead of `known_hosts_file`."},
		{name: "project", identity: true, description: "Incus project that scopes this backend; created (with its own " +
			"images, profiles and storage volumes, networks shared with `default`) when it does not exist, and deleted " +
			"with the backend only if the backend created it and it is empty."},
		{name: "storage_pool", description: "Storage pool of root disks and volumes. Defaults to `default`."},
		{name: "network", description: "Managed network of `network = \"isolated\"` instances. Defaults to `incusbr0`; " +
			"`network = \"bridge\"` uses the NIC network of the default profile instead."},
		{name: "advertise_host", description: "Host name or address where published ports are reached: instance " +
			"`endpoints` are `<advertise_host>:<port>` (or the sandbox's 127.0.0.x under `loopback_ip`)."},
		{name: "port_strategy", description: "How ports are published (as proxy devices on the Incus host): " + enumDoc(portStrategyValues) + "."},
	},
	driver.Kubernetes: {
		{name: "kubeconfig", identity: true, description: "Path of the kubeconfig file."},
		{name: "context", identity: true, description: "Context in the kubeconfig."},
		{name: "namespace", identity: true, description: "Namespace that scopes this backend."},
	},
	driver.Local: {
		{name: "root", identity: true, description: "Directory under which the backend keeps its sandboxes."},
		{name: "isolation", description: "Isolation of the sandboxes: " + enumDoc(isolationValues) + "."},
	},
}

// handleDrivers is the order of the driver blocks of sandbox_backend.
var handleDrivers = []string{driver.Docker, driver.Incus, driver.Kubernetes, driver.Local}

// handleBlockAttrTypes is the object type of a driver block of sandbox_backend
// (`docker = { ... }`), one attribute per handle field.
func handleBlockAttrTypes(drv string) map[string]attr.Type {
	out := map[string]attr.Type{}
	for _, f := range handleFields[drv] {
		if f.isBool {
			out[f.name] = types.BoolType
		} else {
			out[f.name] = types.StringType
		}
	}
	return out
}

// The handle itself is compact: {driver, name, settings}, where settings maps
// the driver's fields that are set to their values as strings ("true" for a
// bool that is set). Every sandbox_instance carries it twice (as `backend`
// and inside its own handle), and Terraform and the plugin framework spend
// their time per attribute node: a nested object per driver with every field
// (74 attributes, mostly null) made the re-plan of a fleet several times
// slower than this map of the few fields a backend really sets.

// handleAttrTypes is the object type of a backend handle.
func handleAttrTypes() map[string]attr.Type {
	return map[string]attr.Type{
		"driver":   types.StringType,
		"name":     types.StringType,
		"settings": types.MapType{ElemType: types.StringType},
	}
}

// handleAttributes builds the nested attributes of a handle. computed=true
// gives the read-only handle of sandbox_backend; false gives the `backend`
// input of the other resources.
func handleAttributes(computed bool) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"driver": schema.StringAttribute{Computed: computed, Required: !computed, Description: "Driver: `docker`, `incus`, `kubernetes` or `local`."},
		"name":   schema.StringAttribute{Computed: computed, Required: !computed, Description: "Backend name (its scope on the engine)."},
		"settings": schema.MapAttribute{Computed: computed, Optional: !computed, ElementType: types.StringType,
			Description: handleSettingsDoc},
	}
}

const handleSettingsDoc = "The resolved settings of the backend's driver block that are set (defaults filled in), " +
	"by attribute name: e.g. `host`, `port_strategy` and `host_key_fingerprint` for `docker`, `address` and " +
	"`project` for `incus`, `root` and `isolation` for `local`; booleans appear as `\"true\"` only when true. " +
	"The keys and their meaning are those of the driver block of the same name; no secret is ever among them."

// HandleFromConfig renders a resolved driver.Config as a handle object.
func HandleFromConfig(cfg driver.Config) (types.Object, diag.Diagnostics) {
	settings := map[string]attr.Value{}
	raw := blockRaw(cfg)
	for _, f := range handleFields[cfg.Driver] {
		switch v := raw[f.name].(type) {
		case bool:
			if v {
				settings[f.name] = types.StringValue("true")
			}
		case string:
			if v != "" {
				settings[f.name] = types.StringValue(v)
			}
		}
	}
	return types.ObjectValue(handleAttrTypes(), map[string]attr.Value{
		"driver":   types.StringValue(cfg.Driver),
		"name":     types.StringValue(cfg.Name),
		"settings": types.MapValueMust(types.StringType, settings),
	})
}

// ConfigFromHandle turns a handle object back into a driver.Config. It
// reports an error diagnostic if the handle is unknown or malformed, naming
// a settings key the driver does not have.
func ConfigFromHandle(ctx context.Context, h types.Object) (driver.Config, diag.Diagnostics) {
	var diags diag.Diagnostics
	var cfg driver.Config
	if h.IsNull() || h.IsUnknown() {
		diags.AddError("Backend Handle Not Known", "The backend handle is not known yet; it is known once its sandbox_backend is planned from configuration.")
		return cfg, diags
	}
	var m struct {
		Driver   types.String `tfsdk:"driver"`
		Name     types.String `tfsdk:"name"`
		Settings types.Map    `tfsdk:"settings"`
	}
	if diags.Append(h.As(ctx, &m, basetypes.ObjectAsOptions{})...); diags.HasError() {
		return cfg, diags
	}
	if m.Driver.IsUnknown() || m.Name.IsUnknown() || m.Settings.IsUnknown() {
		diags.AddError("Backend Handle Not Known", "Part of the backend handle is not known yet; pass `backend = sandbox_backend.NAME.handle`.")
		return cfg, diags
	}
	settings := map[string]string{}
	for key, v := range m.Settings.Elements() {
		sv, ok := v.(types.String)
		if !ok || sv.IsUnknown() {
			diags.AddError("Backend Handle Not Known", fmt.Sprintf("The backend handle's setting %q is not known yet.", key))
			return cfg, diags
		}
		settings[key] = sv.ValueString()
	}
	cfg, err := ConfigFromSettings(m.Driver.ValueString(), m.Name.ValueString(), settings)
	if err != nil {
		diags.AddError(invalidHandleSummary, "The backend handle is not valid: "+err.Error()+
			". Pass `backend = sandbox_backend.NAME.handle` rather than writing a handle by hand.")
	}
	return cfg, diags
}

// invalidHandleSummary is the summary of a handle that cannot be decoded.
const invalidHandleSummary = "Invalid Backend Handle"

// ConfigFromSettings builds the driver.Config a handle describes. A driver
// this provider does not know gets only its driver and name (callers that
// need a known driver report it with the attribute path).
func ConfigFromSettings(drv, name string, settings map[string]string) (driver.Config, error) {
	cfg := driver.Config{Driver: drv, Name: name}
	fields, ok := handleFields[drv]
	if !ok {
		return cfg, nil
	}
	block := map[string]any{}
	for key, v := range settings {
		f, known := fieldByName(fields, key)
		switch {
		case !known:
			return cfg, fmt.Errorf("its settings have the key %q, which a %s backend does not have (it has %s)",
				key, drv, fieldNames(fields))
		case f.isBool:
			block[key] = v == "true"
		default:
			block[key] = v
		}
	}
	if err := jsonRoundTrip(map[string]any{"driver": drv, "name": name, drv: block}, &cfg); err != nil {
		return cfg, fmt.Errorf("it could not be decoded: %w", err)
	}
	return cfg, nil
}

func fieldByName(fields []handleField, name string) (handleField, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return handleField{}, false
}

func fieldNames(fields []handleField) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// objectToRaw converts a known object of strings, bools and nested objects to
// plain Go values, dropping nulls.
func objectToRaw(o basetypes.ObjectValue) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range o.Attributes() {
		if v.IsNull() {
			continue
		}
		if v.IsUnknown() {
			return nil, fmt.Errorf("attribute %q of the backend handle is not known yet", k)
		}
		switch tv := v.(type) {
		case types.String:
			out[k] = tv.ValueString()
		case types.Bool:
			out[k] = tv.ValueBool()
		case types.Object:
			inner, err := objectToRaw(tv)
			if err != nil {
				return nil, err
			}
			out[k] = inner
		default:
			return nil, fmt.Errorf("attribute %q of the backend handle has unexpected type %T", k, v)
		}
	}
	return out, nil
}
