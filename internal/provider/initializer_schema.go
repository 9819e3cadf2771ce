package provider

// The sandbox_initializer schema. Every attribute that changes what runs
// inside the sandbox requires replacement: an initializer cannot undo a
// command, so the only honest way to apply a change is to run on_destroy
// (destroy) and then everything again (create).

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/initplan"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/units"
)

// Defaults of the initializer's timeouts block: create covers every
// command and the readiness wait (package installs can be slow).
const (
	defaultInitCreateTimeout = 20 * time.Minute
	defaultInitDeleteTimeout = 5 * time.Minute
)

const reRunDoc = " A change re-runs the initializer (replacement: `on_destroy`, then everything again)."

// argvListType is the element type of a list of commands: one argv each.
var argvListType = types.ListType{ElemType: types.StringType}

func initializerSchema(ctx context.Context) schema.Schema {
	return schema.Schema{
		Description: initializerDescription,
		Attributes: mergeAttributes(initializerInputAttributes(), initializerComputedAttributes(), map[string]schema.Attribute{
			"timeouts": timeouts.Attributes(ctx, timeouts.Opts{Create: true, Delete: true}),
		}),
	}
}

const initializerDescription = "Brings a sandbox into a known state and waits until what it starts really answers: " +
	"copies `files` in, runs the kind's setup and `commands` in order, keeping each one's exit code and output in " +
	"`results`, then starts `service` detached inside the sandbox and polls its `ready` probe until `timeout`. " +
	"State is saved before the wait, and a failed run stays in state as tainted, so the next apply replaces it " +
	"(`on_destroy`, then everything again). Import is not supported."

func initializerInputAttributes() map[string]schema.Attribute {
	replaceObj := []planmodifier.Object{objectplanmodifier.RequiresReplace()}
	return map[string]schema.Attribute{
		"instance": schema.SingleNestedAttribute{
			Required: true,
			Description: "The sandbox to initialize: write `sandbox_instance.NAME.handle`. A different sandbox (another " +
				"`id`) re-runs the initializer; a change of the backend's connection settings only updates it.",
			Attributes:    instanceHandleAttributes(false),
			PlanModifiers: []planmodifier.Object{sameInstanceOrReplace()},
		},
		"kind": schema.StringAttribute{
			Optional: true, Computed: true, Default: stringdefault.StaticString(initplan.KindCustom),
			Description: "What to set up, default `custom`. Each built-in kind expands to plain steps run before and " +
				"around the user's own (files, then the kind's setup commands as root, then `commands`, then the " +
				"service and its probe); `service` fields given here override the kind's. The kinds:\n\n" +
				initplan.KindsDocumentation() + "\n\n`neo4j` and `joern` need an image that contains them (e.g. built " +
				"FROM the public `neo4j:5` or `ghcr.io/joernio/joern` images); `python` needs Python 3 with its venv " +
				"module; `gdb_mcp` needs gdb and the MCP server." + reRunDoc,
			Validators:    []validator.String{stringvalidator.OneOf(initplan.KindNames()...)},
			PlanModifiers: replaceString,
		},
		"settings": schema.MapAttribute{
			ElementType: types.StringType, Optional: true,
			Description: "Options of the kind (see `kind`); list settings are space- or comma-separated strings. " +
				"Values are shown in plans: put secrets (such as the `neo4j` password) in `sensitive_settings`." + reRunDoc,
			PlanModifiers: replaceMap,
		},
		"sensitive_settings": schema.MapAttribute{
			ElementType: types.StringType, Optional: true, Sensitive: true,
			Description: "Options of the kind, like `settings`, kept out of plan output; a key may not be in both. " +
				"Their values are also masked as `(sensitive)` in `results` and error messages. Masked only: like every " +
				"attribute, they are stored in the Terraform state in plain text, so protect the state (or pass a secret " +
				"in a file with `files[*].source`, of which only a hash is stored)." + reRunDoc,
			PlanModifiers: replaceMap,
		},
		"files":      filesAttribute(initializerFilesDoc),
		"commands":   argvListAttribute("Commands run in order after the files and the kind's setup, each an argv list such as `[\"sh\", \"-c\", \"make\"]` (no shell is implied). They run with `env`, as the sandbox's user, in the kind's working directory (`main`: the workspace)."+reRunDoc, replaceList),
		"env":        initializerEnvAttribute(),
		"service":    serviceAttribute(replaceObj),
		"on_destroy": argvListAttribute("Commands run when the initializer is destroyed or replaced, before its service is stopped, with the same `env`. A failing one is reported as a warning: it never blocks a destroy. When the sandbox is gone or stopped they are skipped. A change updates in place.", nil),
		"triggers": schema.MapAttribute{
			ElementType: types.StringType, Optional: true,
			Description: "Arbitrary values; any change re-runs the initializer (e.g. `{ version = var.app_version }`)." +
				reRunDoc,
			PlanModifiers: replaceMap,
		},
	}
}

func argvListAttribute(desc string, mods []planmodifier.List) schema.ListAttribute {
	return schema.ListAttribute{
		ElementType: argvListType, Optional: true, Description: desc, PlanModifiers: mods,
		Validators: []validator.List{listvalidator.ValueListsAre(
			listvalidator.SizeAtLeast(1),
		)},
	}
}

func initializerEnvAttribute() schema.MapAttribute {
	return schema.MapAttribute{
		ElementType: types.StringType, Optional: true,
		Description: "Environment of the commands, the service, a `command` probe and `on_destroy`, laid over the " +
			"kind's (e.g. `python` sets `VIRTUAL_ENV` and `PATH`). Values are shown in plans and state." + reRunDoc,
		Validators:    []validator.Map{envKeysCheck},
		PlanModifiers: replaceMap,
	}
}

var initializerFilesDoc = filesDoc{
	list: "Files copied into the sandbox first, before any command; parent directories are created." + reRunDoc + " Editing a `source` file re-runs it too.",
	content: "Content of the file. Exactly one of `content` and `source`. Marked sensitive, which only masks it in plan " +
		"and CLI output: the value is stored in the Terraform state in plain text. For secrets use `source` (a local file: only " +
		"its SHA-256 is stored in state) and protect the state.",
	source: "Local file whose content is copied; its SHA-256 is kept in `source_hash`.",
	mode:   "Permissions as an octal string, default `0644`.",
}

func serviceAttribute(mods []planmodifier.Object) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		Description: "A long-running process started after the commands, detached through the in-sandbox agent: it " +
			"survives the exec that started it, its output goes to `service_log` and its pid to a pid file. The apply " +
			"then polls `ready` inside the sandbox (backoff from 250 ms to 2 s) until `timeout`; on timeout the error " +
			"shows the last probe failure, whether the process still runs and the end of its log. Kinds `neo4j`, " +
			"`joern` and `gdb_mcp` bring a default service: fields set here override theirs." + reRunDoc,
		PlanModifiers: mods,
		Attributes: map[string]schema.Attribute{
			"command": schema.ListAttribute{ElementType: types.StringType, Optional: true,
				Description: "Argv of the service; required unless the kind has a default service.",
				Validators:  []validator.List{listvalidator.SizeAtLeast(1)}},
			"workdir": schema.StringAttribute{Optional: true, Description: "Absolute working directory; default: the kind's.",
				Validators: []validator.String{absPathCheck}},
			"user": schema.StringAttribute{Optional: true, Description: "User (`name`, `uid` or `uid:gid`) it runs as; default: the kind's, else the sandbox's.",
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
			"ready":   readyAttribute(),
			"timeout": schema.StringAttribute{Optional: true, Description: fmt.Sprintf("How long to wait for `ready`: %s. Default: the kind's (`neo4j` 3m, `joern` 5m, `gdb_mcp` 1m), else %s.", units.DurationDoc, initplan.DefaultServiceTimeout), Validators: []validator.String{durationCheck}},
		},
	}
}

func readyAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		Description: "When the service counts as ready; set exactly one of `tcp_port`, `http`, `command`. Probes run " +
			"inside the sandbox against 127.0.0.1. Default: the kind's probe, else \"its process is running\".",
		Attributes: map[string]schema.Attribute{
			"tcp_port": schema.Int64Attribute{Optional: true, Description: "Ready when this port accepts a TCP connection.",
				Validators: []validator.Int64{int64validator.Between(1, 65535)}},
			"http": schema.SingleNestedAttribute{Optional: true, Description: "Ready when a GET answers.",
				Attributes: map[string]schema.Attribute{
					"port": schema.Int64Attribute{Required: true, Description: "Port, 1-65535.",
						Validators: []validator.Int64{int64validator.Between(1, 65535)}},
					"path": schema.StringAttribute{Optional: true, Description: "Path, default `/`.",
						Validators: []validator.String{stringvalidator.RegexMatches(httpPathRegexp, "must start with /")}},
					"status": schema.Int64Attribute{Optional: true, Description: "Expected status; default any 2xx or 3xx.",
						Validators: []validator.Int64{int64validator.Between(100, 599)}},
				}},
			"command": schema.ListAttribute{ElementType: types.StringType, Optional: true,
				Description: "Ready when this argv exits 0; it runs with `env`.",
				Validators:  []validator.List{listvalidator.SizeAtLeast(1)}},
		},
	}
}

func initializerComputedAttributes() map[string]schema.Attribute {
	stable := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	return map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, PlanModifiers: stable,
			Description: "Random identifier of this run; it also names the service's log and pid files."},
		"results": schema.ListNestedAttribute{
			Computed:      true,
			PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()},
			Description: fmt.Sprintf("Every command that ran, in order: the kind's setup, `commands` and the agent's "+
				"service start. Each output stream keeps its last %d bytes (behind a `[... N bytes truncated]` line): "+
				"the provider reads the rest and lets it go, so a command with endless output costs bounded memory. "+
				"The values of `sensitive_settings` and the contents of `files` (those of 8 bytes to 64 KiB without "+
				"surrounding white space) are masked as `(sensitive)` before anything is cut, here and in error messages.", initplan.MaxOutput),
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"description": schema.StringAttribute{Computed: true, Description: "What the step was, e.g. `command` or `create virtual environment`."},
				"command":     schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "The argv that ran."},
				"exit_code":   schema.Int64Attribute{Computed: true, Description: "Its exit status."},
				"stdout":      schema.StringAttribute{Computed: true, Description: "End of its standard output."},
				"stderr":      schema.StringAttribute{Computed: true, Description: "End of its standard error."},
			}},
		},
		"ready_at": schema.StringAttribute{Computed: true, PlanModifiers: stable,
			Description: "When the service first answered its probe (RFC 3339); null without a service or before it answered."},
		"service_log": schema.StringAttribute{Computed: true, PlanModifiers: stable,
			Description: "Path of the service's log file inside the sandbox; null without a service."},
		"service_running": schema.BoolAttribute{Computed: true,
			PlanModifiers: []planmodifier.Bool{boolplanmodifier.UseStateForUnknown()},
			Description: "Whether the service process was running at the last refresh (null without a service). " +
				"`false` plans a replacement, which starts it again."},
	}
}

// sameInstanceOrReplace re-runs the initializer when it is pointed at
// another sandbox (or one not known yet), not when only the backend's
// connection settings in the handle change.
func sameInstanceOrReplace() planmodifier.Object {
	const doc = "Replaces the initializer when the sandbox (its id) changes."
	return objectplanmodifier.RequiresReplaceIf(func(ctx context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
		if req.PlanValue.IsUnknown() {
			resp.RequiresReplace = true
			return
		}
		before, d1 := InstanceFromHandle(ctx, req.StateValue)
		after, d2 := InstanceFromHandle(ctx, req.PlanValue)
		resp.RequiresReplace = d1.HasError() || d2.HasError() || before.ID != after.ID ||
			backendIdentity(before.Config) != backendIdentity(after.Config)
	}, doc, doc)
}

// httpPathRegexp: an absolute URL path, without spaces.
var httpPathRegexp = regexp.MustCompile(`^/\S*$`)
