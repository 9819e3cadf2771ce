package provider

// Plan-time validators of sandbox_instance. Each reports at the attribute's
// own path and skips null and unknown values (they are checked once known).

import (
	"context"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/units"
)

const portNameRule = "1-63 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit"

var (
	portNameRegexp   = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)
	capabilityRegexp = regexp.MustCompile(`^(ALL|(CAP_)?[A-Z][A-Z0-9_]*)$`)
	fileModeRegexp   = regexp.MustCompile(`^0?[0-7]{3,4}$`)
)

func joinQuoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// stringCheck adapts a func(string) error into a String validator.
type stringCheck struct {
	desc    string
	summary string
	check   func(string) error
}

func (v stringCheck) Description(context.Context) string         { return v.desc }
func (v stringCheck) MarkdownDescription(context.Context) string { return v.desc }
func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, v.summary, fmt.Sprintf("%s: %s.", req.Path, err))
	}
}

// The string checks of sandbox_instance.
var (
	nameCheck = stringCheck{"a name of " + names.NameRule, "Invalid Name", names.ValidateName}
	sizeCheck = stringCheck{"a size such as 256MiB", "Invalid Size", func(s string) error {
		n, err := units.ParseSize(s)
		if err == nil && n <= 0 {
			err = fmt.Errorf("size %q must be greater than zero", s)
		}
		return err
	}}
	durationCheck = stringCheck{"a duration such as 2h", "Invalid Duration", func(s string) error {
		d, err := units.ParseDuration(s)
		if err == nil && d <= 0 {
			err = fmt.Errorf("duration %q must be greater than zero", s)
		}
		return err
	}}
	absPathCheck    = stringCheck{"an absolute path", "Invalid Path", checkAbsPath}
	fileModeCheck   = stringCheck{"an octal mode such as 0644", "Invalid File Mode", func(s string) error { _, err := parseFileMode(s); return err }}
	fileExistsCheck = stringCheck{"an existing local file", "Source File Not Found", checkRegularFile}
	userCheck       = stringCheck{"a user name or uid, optionally followed by :group or :gid", "Invalid User", checkUser}
)

// checkUser refuses an empty user and numeric ids out of range: a negative
// id, or 4294967295, which setuid takes for "no change" (the command would
// stay root).
func checkUser(s string) error {
	if s == "" {
		return fmt.Errorf("the user is empty; remove the attribute to run as the image's default user")
	}
	u, g, _ := strings.Cut(s, ":")
	for _, id := range []string{u, g} {
		digits := strings.TrimPrefix(id, "-")
		if digits == "" || strings.Trim(digits, "0123456789") != "" {
			continue // a name, resolved by the backend in the image
		}
		if n, err := strconv.ParseUint(id, 10, 64); err != nil || n > driver.MaxUserID {
			return fmt.Errorf("%q: the id %s is out of range; ids go from 0 to %d", s, id, uint64(driver.MaxUserID))
		}
	}
	return nil
}

func checkAbsPath(s string) error {
	switch {
	case !strings.HasPrefix(s, "/"):
		return fmt.Errorf("%q is not an absolute path; start it with /", s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("%q contains a NUL byte", s)
	case path.Clean(s) == "/":
		return fmt.Errorf("%q is the root directory", s)
	case path.Clean(s) != s:
		return fmt.Errorf("%q is not a clean path; write %q", s, path.Clean(s))
	}
	return nil
}

func checkRegularFile(s string) error {
	st, err := os.Stat(s)
	switch {
	case err != nil:
		return fmt.Errorf("cannot read the local file %q: %v", s, err)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%q is not a regular file", s)
	}
	return nil
}

// parseFileMode parses an octal mode string such as "0644" or "755".
func parseFileMode(s string) (os.FileMode, error) {
	if !fileModeRegexp.MatchString(s) {
		return 0, fmt.Errorf("mode %q is not an octal permission string such as \"0644\" or \"0755\"", s)
	}
	n, err := strconv.ParseUint(s, 8, 32)
	return os.FileMode(n), err
}

// positiveFloatValidator requires a number greater than zero (cpus).
type positiveFloatValidator struct{}

func (positiveFloatValidator) Description(context.Context) string         { return "greater than zero" }
func (positiveFloatValidator) MarkdownDescription(context.Context) string { return "greater than zero" }
func (positiveFloatValidator) ValidateFloat64(_ context.Context, req validator.Float64Request, resp *validator.Float64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if v := req.ConfigValue.ValueFloat64(); v <= 0 || v > 1024 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid CPU Limit", fmt.Sprintf("%s: %v is not a CPU count; use a number of cores greater than 0, such as 0.5 or 2.", req.Path, v))
	}
}

// mapKeysValidator checks every known key of a string map.
type mapKeysValidator struct {
	desc, summary string
	check         func(k, v string) error
}

func (v mapKeysValidator) Description(context.Context) string         { return v.desc }
func (v mapKeysValidator) MarkdownDescription(context.Context) string { return v.desc }
func (v mapKeysValidator) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		s, ok := e.(types.String)
		if !ok || s.IsUnknown() {
			continue
		}
		if err := v.check(k, s.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), v.summary, fmt.Sprintf("%s: %s.", req.Path.AtMapKey(k), err))
		}
	}
}

var (
	envKeysCheck = mapKeysValidator{"environment variable names", "Invalid Environment Variable", func(k, v string) error {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%q is not a valid environment variable name (non-empty, without '=')", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("the value of %q contains a NUL byte", k)
		}
		if strings.HasPrefix(k, driver.ReservedEnvPrefix) {
			return fmt.Errorf("%q: names starting with %s are reserved for the provider's own wrapper processes; rename the variable", k, driver.ReservedEnvPrefix)
		}
		return nil
	}}
	labelsCheck = mapKeysValidator{"label keys and values", "Invalid Label", func(k, v string) error {
		if err := names.ValidateLabelKey(k); err != nil {
			return err
		}
		return names.ValidateLabelValue(v)
	}}
)

// uniquePortNamesValidator rejects two ports with one name: names key `endpoints`.
type uniquePortNamesValidator struct{}

func (uniquePortNamesValidator) Description(context.Context) string { return "port names are unique" }
func (uniquePortNamesValidator) MarkdownDescription(context.Context) string {
	return "port names are unique"
}
func (uniquePortNamesValidator) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	seen := map[string]int{}
	for i, e := range req.ConfigValue.Elements() {
		obj, ok := e.(types.Object)
		if !ok || obj.IsNull() || obj.IsUnknown() {
			continue
		}
		n, ok := obj.Attributes()["name"].(types.String)
		if !ok || n.IsNull() || n.IsUnknown() {
			continue
		}
		if j, dup := seen[n.ValueString()]; dup {
			at := req.Path.AtListIndex(i).AtName("name")
			resp.Diagnostics.AddAttributeError(at, "Duplicate Port Name",
				fmt.Sprintf("%s: the port name %q is already used by ports[%d]; each port needs its own name, the key of `endpoints`.", at, n.ValueString(), j))
		}
		seen[n.ValueString()] = i
	}
}

// nameValidator and labelsValidator expose nameCheck and labelsCheck as
// types, for the other resources (backend, volume, provider labels).
type (
	nameValidator   struct{}
	labelsValidator struct{}
)

func (nameValidator) Description(ctx context.Context) string { return nameCheck.Description(ctx) }
func (nameValidator) MarkdownDescription(ctx context.Context) string {
	return nameCheck.MarkdownDescription(ctx)
}
func (nameValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	nameCheck.ValidateString(ctx, req, resp)
}

func (labelsValidator) Description(ctx context.Context) string { return labelsCheck.Description(ctx) }
func (labelsValidator) MarkdownDescription(ctx context.Context) string {
	return labelsCheck.MarkdownDescription(ctx)
}
func (labelsValidator) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	labelsCheck.ValidateMap(ctx, req, resp)
}
