package provider

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func TestHandleRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []driver.Config{
		{Driver: driver.Docker, Name: "gpu", Docker: &driver.DockerConfig{Host: "ssh://me@gpu1:2222", KnownHostsFile: "/root/.ssh/known_hosts",
			HostKeyFingerprint: "SHA256:abc", PortStrategy: "dynamic", AdvertiseHost: "gpu1", Internal: true}},
		{Driver: driver.Docker, Name: "plain", Docker: &driver.DockerConfig{Host: "unix:///var/run/docker.sock"}},
		{Driver: driver.Incus, Name: "i", Incus: &driver.IncusConfig{Project: "sandbox-i", StoragePool: "default", Network: "incusbr0"}},
		{Driver: driver.Local, Name: "dev", Local: &driver.LocalConfig{Root: "/var/lib/sandbox/dev", Isolation: "bwrap"}},
		{Driver: driver.Kubernetes, Name: "k", Kubernetes: &driver.KubernetesConfig{Kubeconfig: "/k", Namespace: "ns"}},
	} {
		h, diags := HandleFromConfig(cfg)
		if diags.HasError() {
			t.Fatalf("%s: %v", cfg.Name, diags)
		}
		back, diags := ConfigFromHandle(ctx, h)
		if diags.HasError() {
			t.Fatalf("%s: %v", cfg.Name, diags)
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Errorf("%s: round trip gave %+v, want %+v", cfg.Name, back, cfg)
		}
	}
}

// Only set fields appear in settings: false booleans and empty strings are
// left out, so the handle stays small.
func TestHandleSettingsHoldOnlyWhatIsSet(t *testing.T) {
	h, diags := HandleFromConfig(driver.Config{Driver: driver.Docker, Name: "b",
		Docker: &driver.DockerConfig{Host: "unix:///var/run/docker.sock", AllowInsecureTCP: false, Internal: true}})
	if diags.HasError() {
		t.Fatal(diags)
	}
	got := map[string]string{}
	for k, v := range h.Attributes()["settings"].(types.Map).Elements() {
		got[k] = v.(types.String).ValueString()
	}
	want := map[string]string{"host": "unix:///var/run/docker.sock", "internal": "true"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("settings = %v, want %v", got, want)
	}
}

func handleWith(t *testing.T, drv string, settings map[string]attr.Value) types.Object {
	t.Helper()
	settingsValue := types.MapUnknown(types.StringType)
	if settings != nil {
		settingsValue = types.MapValueMust(types.StringType, settings)
	}
	obj, diags := types.ObjectValue(handleAttrTypes(), map[string]attr.Value{
		"driver": types.StringValue(drv), "name": types.StringValue("b"), "settings": settingsValue,
	})
	if diags.HasError() {
		t.Fatal(diags)
	}
	return obj
}

func TestConfigFromHandleRejectsUnknownKey(t *testing.T) {
	_, diags := ConfigFromHandle(context.Background(), handleWith(t, driver.Docker, map[string]attr.Value{
		"host": types.StringValue("unix:///x"), "project": types.StringValue("p"),
	}))
	if !diags.HasError() {
		t.Fatal("a docker handle with an incus key was accepted")
	}
	msg := diags[0].Detail()
	for _, want := range []string{`"project"`, "docker backend", "host_key_fingerprint", "sandbox_backend.NAME.handle"} {
		if !strings.Contains(msg, want) {
			t.Errorf("diagnostic %q does not mention %s", msg, want)
		}
	}
}

func TestConfigFromHandleUnknownSettings(t *testing.T) {
	_, diags := ConfigFromHandle(context.Background(), handleWith(t, driver.Docker, nil))
	if !diags.HasError() || !strings.Contains(diags[0].Summary(), "Not Known") {
		t.Fatalf("unknown settings gave %v", diags)
	}
	_, diags = ConfigFromHandle(context.Background(), handleWith(t, driver.Docker, map[string]attr.Value{"host": types.StringUnknown()}))
	if !diags.HasError() || !strings.Contains(diags[0].Detail(), `"host"`) {
		t.Fatalf("an unknown setting gave %v", diags)
	}
}
