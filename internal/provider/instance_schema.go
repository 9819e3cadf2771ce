package provider

import (
	"context"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/units"
)

var instanceTypeValues = []enumValue{
	{driver.TypeContainer, "a container; every backend"},
	{driver.TypeVM, "a virtual machine; incus backends only"},
}

var networkValues = []enumValue{
	{driver.NetworkNone, "no network but loopback"},
	{driver.NetworkIsolated, "the backend's own network, shared only with the backend's other sandboxes (on incus: the managed " +
		"network `incus.network`, `incusbr0` unless set, shared with whatever else on the server uses it; the backend's plan warns)"},
	{driver.NetworkBridge, "the engine's default network, with egress; on a local backend, the host's network"},
}

var protocolValues = []enumValue{
	{"tcp", "TCP"},
	{"udp", "UDP"},
}

// Defaults of the security object: the settings for untrusted code.
const defaultFileMode = "0644"

var defaultCapDrop = []string{"AUDIT_WRITE", "MKNOD", "NET_RAW", "SETFCAP", "SYS_CHROOT"}

// replace is the plan modifier of every attribute that cannot change in place.
var (
	replaceString = []planmodifier.String{stringplanmodifier.RequiresReplace()}
	replaceList   = []planmodifier.List{listplanmodifier.RequiresReplace()}
	replaceMap    = []planmodifier.Map{replaceMapUnlessEmpty()} // {} and null are the same
)

// Engines cannot lift a limit in place (Docker's update treats 0 as "keep"),
// so removing one replaces the sandbox; changing one does not.
const liftDoc = "Removing a limit replaces the sandbox: engines cannot lift a limit in place."

func limitRemovedFloat(_ context.Context, req planmodifier.Float64Request, resp *float64planmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = known(req.StateValue) && req.PlanValue.IsNull()
}

func limitRemovedString(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = known(req.StateValue) && req.PlanValue.IsNull()
}

func limitRemovedInt(_ context.Context, req planmodifier.Int64Request, resp *int64planmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = known(req.StateValue) && req.PlanValue.IsNull()
}

func instanceSchema(ctx context.Context) schema.Schema {
	return schema.Schema{
		Description: "A sandbox: a container (or an incus virtual machine) on a backend, with its limits, network, " +
			"published ports, files and volumes. A sandbox stopped outside Terraform, or by its `lifetime`, is kept and " +
			"reported in `status`; it is never destroyed by a refresh. A sandbox whose command ends by itself stays `stopped` " +
			"(see `running` and `exit_code`).\n\n" +
			"Import (`<backend import ID>/<name>`) reads back what the engine keeps: on docker and local the command, env, " +
			"workdir, user, network, ports, volumes, limits (cpus, memory, pids_limit) and lifetime, so importing a sandbox " +
			"without `files` plans nothing. File contents cannot be read back: for a sandbox with `files`, add " +
			"`lifecycle { ignore_changes = [files] }` to the imported resource or accept a replacement. `disk` and `security` " +
			"are not read back on any backend; incus reads back the name, image, type, labels, run state and ports only, and " +
			"takes everything else from the configuration.",
		Attributes: mergeAttributes(instanceInputAttributes(), instanceComputedAttributes(), map[string]schema.Attribute{
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		}),
	}
}

func mergeAttributes(ms ...map[string]schema.Attribute) map[string]schema.Attribute {
	out := map[string]schema.Attribute{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func instanceInputAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"backend": schema.SingleNestedAttribute{
			Required: true,
			Description: "The backend to run on: `sandbox_backend.NAME.handle`. Moving to another engine or scope (driver, " +
				"name, host, address, project, namespace, root) replaces the sandbox; a change of connection settings " +
				"(key files, a newly trusted SSH host key, ...) updates it in place.",
			Attributes:    handleAttributes(false),
			PlanModifiers: []planmodifier.Object{backendRequiresReplace()},
		},
		"image": schema.StringAttribute{
			Required:      true,
			Description:   "Image to run: `sandbox_image.NAME.image_id`, or any reference the backend resolves. A change replaces the sandbox.",
			Validators:    []validator.String{stringvalidator.LengthAtLeast(1)},
			PlanModifiers: replaceString,
		},
		"name": schema.StringAttribute{
			Optional: true, Computed: true,
			Description: "Name, unique within the backend: " + names.NameRule + ". Default: `sandbox-` and random characters, " +
				"chosen at creation. A change replaces the sandbox. The engine knows the sandbox by `engine_name`: the Docker " +
				"container and the Incus instance are named `<backend>-<name>` (on Incus cut and made unique with a hash past 63 characters).",
			Validators:    []validator.String{nameCheck},
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
		},
		"type": schema.StringAttribute{
			Optional: true, Computed: true, Default: stringdefault.StaticString(driver.TypeContainer),
			Description:   "Kind of sandbox: " + enumDoc(instanceTypeValues) + ". A change replaces the sandbox.",
			Validators:    []validator.String{stringvalidator.OneOf(enumStrings(instanceTypeValues)...)},
			PlanModifiers: replaceString,
		},
		"command": schema.ListAttribute{
			ElementType: types.StringType, Optional: true,
			Description:   "Command and arguments; default: the image's. A change replaces the sandbox.",
			Validators:    []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
			PlanModifiers: replaceList,
		},
		"env": schema.MapAttribute{
			ElementType: types.StringType, Optional: true,
			Description: "Environment variables. Values are visible in plans and state: pass secrets as `files` " +
				"(whose `content` is sensitive). A change replaces the sandbox.",
			Validators:    []validator.Map{envKeysCheck},
			PlanModifiers: replaceMap,
		},
		"workdir": schema.StringAttribute{
			Optional: true, Description: "Absolute working directory of the command. A change replaces the sandbox.",
			Validators: []validator.String{absPathCheck}, PlanModifiers: replaceString,
		},
		"user": schema.StringAttribute{
			Optional: true, Description: "User (`name`, `uid` or `uid:gid`) the command runs as. A change replaces the sandbox.",
			Validators: []validator.String{userCheck}, PlanModifiers: replaceString,
		},
		"labels": schema.MapAttribute{
			ElementType: types.StringType, Optional: true,
			Description: "Labels of the sandbox, merged over the provider's `labels`. Keys: " + names.LabelKeyRule +
				". A change replaces the sandbox, because engines such as Docker cannot relabel a container.",
			Validators:    []validator.Map{labelsCheck},
			PlanModifiers: replaceMap,
		},
		"cpus": schema.Float64Attribute{
			Optional: true, Description: "CPU limit in cores, e.g. `0.5`. Changes in place; removing it replaces the sandbox.",
			Validators:    []validator.Float64{positiveFloatValidator{}},
			PlanModifiers: []planmodifier.Float64{float64planmodifier.RequiresReplaceIf(limitRemovedFloat, liftDoc, liftDoc)},
		},
		"memory": schema.StringAttribute{
			Optional: true, Description: "Memory limit: " + units.SizeUnitsDoc + ". Changes in place; removing it replaces the sandbox.",
			Validators:    []validator.String{sizeCheck},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIf(limitRemovedString, liftDoc, liftDoc)},
		},
		"pids_limit": schema.Int64Attribute{
			Optional: true, Description: "Maximum number of processes. Threads count too, including the ten or so of the sandbox's own init " +
				"(the local backend requires at least 24). Unset, a container gets the safe default of " + strconv.Itoa(driver.DefaultPidsLimit) +
				" where the engine can limit processes (Docker, Podman with the pids controller, Incus containers, local as root with cgroups); " +
				"the attribute then stays null and no plan shows a difference. `0` means unlimited (no default either). " +
				"Incus virtual machines take no pids limit. Changes in place; removing it replaces the sandbox.",
			Validators:    []validator.Int64{int64validator.AtLeast(0)},
			PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplaceIf(limitRemovedInt, liftDoc, liftDoc)},
		},
		"disk": schema.StringAttribute{
			Optional: true, Description: "Root disk size limit (" + units.SizeUnitsDoc + "), on backends that support it. A change replaces the sandbox.",
			Validators: []validator.String{sizeCheck}, PlanModifiers: replaceString,
		},
		"network": schema.StringAttribute{
			Optional: true, Computed: true, Default: stringdefault.StaticString(driver.NetworkIsolated),
			Description:   "Network: " + enumDoc(networkValues) + ". A change replaces the sandbox.",
			Validators:    []validator.String{stringvalidator.OneOf(enumStrings(networkValues)...)},
			PlanModifiers: replaceString,
		},
		"ports":   portsAttribute(),
		"files":   filesAttribute(instanceFilesDoc),
		"volumes": volumesAttribute(),
		"running": schema.BoolAttribute{
			Optional: true, Computed: true, Default: booldefault.StaticBool(true),
			Description: "Whether the sandbox should run: `true` means started by apply. `false` stops it and keeps it. A sandbox stopped outside Terraform " +
				"while `running = true` is started again by the next apply (an in-place update). An `expired` one is not, and neither is " +
				"one whose command ended by itself (`exit_code` set, e.g. `command = [\"true\"]`): it stays `stopped`, the plan warns " +
				"\"exited with code N\", and `terraform apply -replace` runs it again. A command that cannot be started (not found, " +
				"not executable) fails the create.",
		},
		"lifetime": schema.StringAttribute{
			Optional: true,
			Description: "After this long the sandbox is stopped on the engine side, without Terraform running: " +
				units.DurationDoc + ". Its `status` then reads `expired`; it is kept until destroyed. A change replaces the sandbox.",
			Validators: []validator.String{durationCheck}, PlanModifiers: replaceString,
		},
		"security": securityAttribute(),
	}
}

func portsAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional: true,
		Description: "Ports to publish. How they are reached follows the backend's `port_strategy`; see `endpoints`. " +
			"A change replaces the sandbox.",
		Validators:    []validator.List{uniquePortNamesValidator{}},
		PlanModifiers: []planmodifier.List{replaceListUnlessReordered()}, // named: the order means nothing
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, Description: "Name of the port, the key in `endpoints`: " + portNameRule + ".",
				Validators: []validator.String{stringvalidator.RegexMatches(portNameRegexp, "must be "+portNameRule)}},
			"port": schema.Int64Attribute{Required: true, Description: "Port inside the sandbox, 1-65535.",
				Validators: []validator.Int64{int64validator.Between(1, 65535)}},
			"protocol": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("tcp"),
				Description: "Protocol: " + enumDoc(protocolValues) + ".",
				Validators:  []validator.String{stringvalidator.OneOf(enumStrings(protocolValues)...)}},
		}},
	}
}

var instanceFilesDoc = filesDoc{
	list: "Files placed in the sandbox before it starts. A change (including of a `source` file's content) replaces the sandbox.",
	content: "Content of the file. Exactly one of `content` and `source`. Marked sensitive, which only masks it in plan " +
		"and CLI output: the value is stored in the Terraform state in plain text. For secrets use `source` (a local file: only " +
		"its SHA-256 is stored in state) and protect the state.",
	source: "Local file whose content is copied. Its SHA-256 is kept in `source_hash`, so editing the file plans a replacement.",
	mode:   "Permissions as an octal string, e.g. `0644` (default) or `0755`.",
}

func volumesAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional:      true,
		Description:   "Volumes of the same backend to mount. A change replaces the sandbox.",
		PlanModifiers: replaceList,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"volume": schema.StringAttribute{Required: true, Description: "Volume name: `sandbox_volume.NAME.name`.",
				Validators: []validator.String{nameCheck}},
			"target": schema.StringAttribute{Required: true, Description: "Absolute mount point inside the sandbox.",
				Validators: []validator.String{absPathCheck}},
			"read_only": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Mount read-only. Default `false`."},
		}},
	}
}

// securityAttrTypes is the object type of `security`.
func securityAttrTypes() map[string]attr.Type {
	return map[string]attr.Type{
		"no_new_privileges": types.BoolType,
		"privileged":        types.BoolType,
		"read_only_rootfs":  types.BoolType,
		"init":              types.BoolType,
		"capabilities":      types.ObjectType{AttrTypes: capabilitiesAttrTypes()},
	}
}

func capabilitiesAttrTypes() map[string]attr.Type {
	return map[string]attr.Type{"add": types.ListType{ElemType: types.StringType}, "drop": types.ListType{ElemType: types.StringType}}
}

func defaultCapabilities() types.Object {
	return types.ObjectValueMust(capabilitiesAttrTypes(), map[string]attr.Value{
		"add":  types.ListValueMust(types.StringType, []attr.Value{}),
		"drop": types.ListValueMust(types.StringType, defaultCapDropValues()),
	})
}

// defaultCapDropValues is defaultCapDrop as list elements.
func defaultCapDropValues() []attr.Value {
	drop := make([]attr.Value, len(defaultCapDrop))
	for i, c := range defaultCapDrop {
		drop[i] = types.StringValue(c)
	}
	return drop
}

func defaultSecurity() types.Object {
	return types.ObjectValueMust(securityAttrTypes(), map[string]attr.Value{
		"no_new_privileges": types.BoolValue(true),
		"privileged":        types.BoolValue(false),
		"read_only_rootfs":  types.BoolValue(false),
		"init":              types.BoolValue(true),
		"capabilities":      defaultCapabilities(),
	})
}

func securityAttribute() schema.SingleNestedAttribute {
	capList := func(desc string, def []attr.Value) schema.ListAttribute {
		return schema.ListAttribute{ElementType: types.StringType, Optional: true, Computed: true, Description: desc,
			Default:    listdefault.StaticValue(types.ListValueMust(types.StringType, def)),
			Validators: []validator.List{listvalidator.ValueStringsAre(stringvalidator.RegexMatches(capabilityRegexp, "must be a capability name such as NET_ADMIN, or ALL"))}}
	}
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true, Default: objectdefault.StaticValue(defaultSecurity()),
		Description: "Hardening. The defaults are the settings for untrusted code: no privilege escalation, not privileged, " +
			"an init process as PID 1, and a few rarely needed capabilities dropped. Relax them only for code you trust. " +
			"A change replaces the sandbox.",
		PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
		Attributes: map[string]schema.Attribute{
			"no_new_privileges": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "Processes cannot gain privileges (setuid binaries, file capabilities). Default `true`. " +
					"On a local backend with `isolation = \"bwrap\"` it is always on: bubblewrap sets it for every sandbox."},
			"privileged": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Run privileged, with every capability and device. Default `false`; never for untrusted code " +
					"(every plan that creates or changes a privileged sandbox warns)."},
			"read_only_rootfs": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Mount the root file system read-only (volumes and `files` stay as configured). Default `false`."},
			"init": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "Run an init process as PID 1 that reaps zombies, forwards signals and enforces `lifetime`. Default `true`."},
			"capabilities": schema.SingleNestedAttribute{Optional: true, Computed: true,
				Default:     objectdefault.StaticValue(defaultCapabilities()),
				Description: "Linux capabilities to add to or drop from the engine's default set.",
				Attributes: map[string]schema.Attribute{
					"add":  capList("Capabilities to add, e.g. `[\"NET_ADMIN\"]`. Default none; the plan warns of any added.", nil),
					"drop": capList("Capabilities to drop; `ALL` drops every one not in `add`. Default `"+joinQuoted(defaultCapDrop)+"`.", defaultCapDropValues()),
				}},
		},
	}
}

func instanceComputedAttributes() map[string]schema.Attribute {
	stable := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	return map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, Description: "Engine ID of the sandbox.", PlanModifiers: stable},
		"handle": schema.SingleNestedAttribute{
			Computed:      true,
			Description:   "Everything needed to reach this sandbox (its backend's handle plus its identity): pass it as `instance` to `sandbox_initializer`.",
			Attributes:    instanceHandleAttributes(true),
			PlanModifiers: []planmodifier.Object{objectplanmodifier.UseStateForUnknown()},
		},
		"status": schema.StringAttribute{Computed: true,
			Description: "Observed state: `running`, `stopped`, `expired` (its `lifetime` ran out), `created` or `unknown`."},
		"ip_address": schema.StringAttribute{Computed: true, Description: "IPv4 address of the running sandbox on its network, if any (on Incus, from the DHCP or static lease of its NIC on the managed network)."},
		"exit_code": schema.Int64Attribute{Computed: true,
			Description: "The exit status of the sandbox's command when it ended by itself (`status = \"stopped\"`); null while it runs, " +
				"when it was stopped (by Terraform or outside it: SIGTERM/SIGKILL), or when the engine does not report it (incus)."},
		"endpoints":  schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "Where each port is reached: port name → `host:port`."},
		"expires_at": schema.StringAttribute{Computed: true, Description: "When `lifetime` runs out (RFC 3339); null without a lifetime.", PlanModifiers: stable},
		"engine_name": schema.StringAttribute{Computed: true, PlanModifiers: stable,
			Description: "What the engine calls the sandbox, for its own tools: the Docker container name " +
				"(`<backend>-<name>`: `docker exec -it <engine_name> sh`), the Incus instance name (`<backend>-<name>`, " +
				"shortened with a hash past 63 characters: `incus exec <engine_name> --project <project> -- sh`), " +
				"or the local sandbox's directory (`<root>/<backend>/instances/<name>`)."},
		"loopback_ip": schema.StringAttribute{Computed: true, Description: "The 127.0.0.x allocated to this sandbox under the `loopback_ip` port strategy; null otherwise.", PlanModifiers: stable},
	}
}
