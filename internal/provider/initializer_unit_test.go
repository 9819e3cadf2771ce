package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/initplan"
)

func TestInitplanErrorPath(t *testing.T) {
	sensitive := types.MapValueMust(types.StringType, map[string]attr.Value{"password": types.StringValue("secret-pw")})
	cases := []struct {
		msg  string
		want path.Path
		ok   bool
	}{
		{"files[2].path: \"x\" must be absolute", path.Root("files").AtListIndex(2).AtName("path"), true},
		{"commands[0]: a command needs at least a program name", path.Root("commands").AtListIndex(0), true},
		{"settings.venv: must be absolute", path.Root("settings").AtMapKey("venv"), true},
		{"settings.password: must be at least 8 characters", path.Root("sensitive_settings").AtMapKey("password"), true},
		{"settings.username and settings.password: set both or neither", path.Root("settings").AtMapKey("username"), true},
		{"service.ready.http.port: 0 is not a port", path.Root("service").AtName("ready").AtName("http").AtName("port"), true},
		{"service.command: required", path.Root("service").AtName("command"), true},
		{"kind: \"x\" is not a known kind", path.Root("kind"), true},
		{"env: \"A=B\" is not a valid variable name", path.Root("env"), true},
		{"name: bad", path.Empty(), false}, // not an attribute of the resource
		{"something without a path", path.Empty(), false},
	}
	for _, c := range cases {
		got, ok := initplanErrorPath(c.msg, sensitive)
		if ok != c.ok || (ok && !got.Equal(c.want)) {
			t.Errorf("%q: got %s %v, want %s %v", c.msg, got, ok, c.want, c.ok)
		}
	}
}

func TestExpandDiagnosticMasksSensitiveSettings(t *testing.T) {
	sensitive := types.MapValueMust(types.StringType, map[string]attr.Value{"index_url": types.StringValue("ftp://user:hunter2@x")})
	d := expandDiagnostic(errors.New(`settings.index_url: "ftp://user:hunter2@x" is not an http(s) URL`), sensitive)
	if strings.Contains(d.Detail(), "hunter2") {
		t.Errorf("secret in detail: %s", d.Detail())
	}
	if !strings.HasPrefix(d.Detail(), "sensitive_settings.index_url:") {
		t.Errorf("detail should name sensitive_settings: %s", d.Detail())
	}
}

func TestSplitAtWait(t *testing.T) {
	p, err := initplan.Expand(initplan.Input{
		Name:     "x",
		Commands: [][]string{{"true"}},
		Service:  &initplan.Service{Command: []string{"sleep", "1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pre, wait := splitAtWait(p)
	if len(pre.Steps) != 2 || pre.Steps[1].Kind != initplan.StepService {
		t.Errorf("pre: %+v", pre.Steps)
	}
	if len(wait.Steps) != 1 || wait.Steps[0].Kind != initplan.StepWait {
		t.Errorf("wait: %+v", wait.Steps)
	}
	svc, ok := serviceOf(p)
	if !ok || svc.PIDFile != initplan.StateDir+"/x.pid" {
		t.Errorf("serviceOf: %+v %v", svc, ok)
	}
	noSvc, _ := initplan.Expand(initplan.Input{Commands: [][]string{{"true"}}})
	pre, wait = splitAtWait(noSvc)
	if len(pre.Steps) != 1 || len(wait.Steps) != 0 {
		t.Errorf("without a service: pre %d, wait %d steps", len(pre.Steps), len(wait.Steps))
	}
}

func TestStderrTail(t *testing.T) {
	long := strings.Repeat("line\n", 30) + "the cause\n"
	got := stderrTail([]initplan.Result{{Command: []string{"make"}, ExitCode: 2, Stderr: long}})
	if !strings.Contains(got, "exit code 2") || !strings.HasSuffix(got, "the cause") || strings.Count(got, "line") != 19 {
		t.Errorf("tail: %q", got)
	}
	if stderrTail([]initplan.Result{{ExitCode: 0, Stderr: "warning"}}) != "" {
		t.Error("a successful command has no tail")
	}
}

func TestRunErrorAdvice(t *testing.T) {
	tgt := initTarget{ref: InstanceRef{Name: "web"}, cfg: driver.Config{Driver: "docker", Name: "b", Docker: &driver.DockerConfig{Host: "unix:///d.sock"}}}
	d := runError("Unable to Create Sandbox Initializer", tgt, errors.New("command [\"false\"] exited with status 1"), nil)
	if !strings.Contains(d.Detail(), `instance "web" of docker backend "b" (unix:///d.sock)`) || !strings.Contains(d.Detail(), "tainted") {
		t.Errorf("detail: %s", d.Detail())
	}
	d = runError("x", tgt, driver.ErrUnavailable, nil)
	if !strings.Contains(d.Detail(), "reachable") {
		t.Errorf("an unreachable engine should get the engine advice: %s", d.Detail())
	}
}

func TestInitializerSchemaDocumentsKinds(t *testing.T) {
	var resp resource.SchemaResponse
	NewInitializerResource().Schema(context.Background(), resource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	kind := resp.Schema.Attributes["kind"].GetDescription()
	for _, k := range initplan.Kinds() {
		if !strings.Contains(kind, k.Documentation()) {
			t.Errorf("kind docs lack %s", k.Name)
		}
	}
	for name, a := range resp.Schema.Attributes {
		if a.GetDescription() == "" && name != "timeouts" {
			t.Errorf("%s has no description", name)
		}
	}
}
