package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestUserCheckRefusesIDsOutOfRange: 4294967295 is (uid_t)-1, "no change" to
// setuid, so such a user would leave the command root.
func TestUserCheckRefusesIDsOutOfRange(t *testing.T) {
	for _, s := range []string{"", "4294967295", "1000:4294967295", "-1", "0:-5", "99999999999999999999"} {
		resp := validateString(t, userCheck, "user", s)
		if !resp.Diagnostics.HasError() {
			t.Errorf("user %q: accepted", s)
			continue
		}
		d := resp.Diagnostics.Errors()[0].Detail()
		if !strings.HasPrefix(d, "user: ") {
			t.Errorf("user %q: the diagnostic does not name the attribute: %q", s, d)
		}
	}
	for _, s := range []string{"0", "1000", "1000:1000", "4294967294:4294967294", "nobody", "app:staff", "www-data"} {
		if resp := validateString(t, userCheck, "user", s); resp.Diagnostics.HasError() {
			t.Errorf("user %q: refused: %v", s, resp.Diagnostics)
		}
	}
}

// TestEnvKeysCheckReservesWrapperVariables: the local backend's wrapper runs
// as root and writes its exit record where SBX_EXIT says.
func TestEnvKeysCheckReservesWrapperVariables(t *testing.T) {
	env := types.MapValueMust(types.StringType, map[string]attr.Value{
		"SBX_EXIT": types.StringValue("/etc/passwd"), "SBX_CGROUPS": types.StringValue("/etc/shadow"), "SBXOK": types.StringValue("1"),
	})
	resp := &validator.MapResponse{}
	envKeysCheck.ValidateMap(context.Background(), validator.MapRequest{Path: path.Root("env"), ConfigValue: env}, resp)
	if n := resp.Diagnostics.ErrorsCount(); n != 2 {
		t.Fatalf("%d errors, want one for each SBX_ name: %v", n, resp.Diagnostics)
	}
	for _, d := range resp.Diagnostics.Errors() {
		if !strings.HasPrefix(d.Detail(), `env["SBX_`) || !strings.Contains(d.Detail(), "reserved") {
			t.Errorf("the diagnostic does not name env[...] and say why: %q", d.Detail())
		}
	}
}

func validateString(t *testing.T, v validator.String, attr, s string) *validator.StringResponse {
	t.Helper()
	resp := &validator.StringResponse{}
	v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root(attr), ConfigValue: types.StringValue(s)}, resp)
	return resp
}
