package initplan

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

const ag = "/.sandbox/sandbox-agent"

func mustExpand(t *testing.T, in Input) Plan {
	t.Helper()
	p, err := Expand(in)
	if err != nil {
		t.Fatalf("Expand: %v", err)
	}
	return p
}

func equal(t *testing.T, got, want Plan) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan differs\n got: %#v\nwant: %#v", got, want)
		for i := 0; i < len(got.Steps) && i < len(want.Steps); i++ {
			if !reflect.DeepEqual(got.Steps[i], want.Steps[i]) {
				t.Errorf("first differing step %d\n got: %#v\nwant: %#v", i, got.Steps[i], want.Steps[i])
				break
			}
		}
	}
}

func TestExpandCustom(t *testing.T) {
	files := []driver.File{{Path: "/srv/index.html", Content: []byte("ok"), Mode: 0o644}}
	env := map[string]string{"A": "1"}
	got := mustExpand(t, Input{
		Kind:     "custom",
		Files:    files,
		Commands: [][]string{{"sh", "-c", "echo ready > /tmp/state"}},
		Env:      env,
		Service: &Service{
			Command: []string{"httpd", "-f", "-p", "8080", "-h", "/srv"},
			Ready:   Ready{TCPPort: 8080},
			Timeout: 60 * time.Second,
		},
		OnDestroy: [][]string{{"sh", "-c", "echo bye"}},
	})
	log, pid := "/.sandbox/run/init.log", "/.sandbox/run/init.pid"
	equal(t, got, Plan{
		Kind: "custom",
		Steps: []Step{
			{Kind: StepFiles, Description: "copy files", Files: files, UserFiles: true},
			{Kind: StepRun, Description: "command", Command: []string{"sh", "-c", "echo ready > /tmp/state"}, Env: env},
			{Kind: StepService, Description: "start service", Env: env, LogPath: log, PIDFile: pid,
				Command: []string{ag, "service", "--log", log, "--pidfile", pid, "--", "httpd", "-f", "-p", "8080", "-h", "/srv"}},
			{Kind: StepWait, Description: "wait for service readiness", LogPath: log, PIDFile: pid, Timeout: time.Minute,
				Command: []string{ag, "probe", "tcp", "8080"}},
		},
		OnDestroy: []Step{{Kind: StepRun, Description: "on_destroy command", Command: []string{"sh", "-c", "echo bye"}, Env: env}},
	})
}

func TestExpandEmptyKindIsCustomWithoutService(t *testing.T) {
	got := mustExpand(t, Input{Commands: [][]string{{"true"}}})
	equal(t, got, Plan{Kind: "custom", Steps: []Step{{Kind: StepRun, Description: "command", Command: []string{"true"}}}})
}

func TestExpandReadyVariants(t *testing.T) {
	cases := []struct {
		ready Ready
		probe []string
		env   bool
	}{
		{Ready{}, []string{ag, "probe", "pid", "/.sandbox/run/web.pid"}, false},
		{Ready{HTTP: &HTTPReady{Port: 80, Path: "/health"}}, []string{ag, "probe", "http", "80", "/health"}, false},
		{Ready{HTTP: &HTTPReady{Port: 80, Status: 204}}, []string{ag, "probe", "http", "80", "/", "204"}, false},
		{Ready{Command: []string{"test", "-f", "/ready"}}, []string{"test", "-f", "/ready"}, true},
	}
	for _, c := range cases {
		p := mustExpand(t, Input{Name: "web", Env: map[string]string{"X": "y"},
			Service: &Service{Command: []string{"srv"}, Ready: c.ready, User: "1000", Workdir: "/w"}})
		start, wait := p.Steps[0], p.Steps[1]
		if !reflect.DeepEqual(wait.Command, c.probe) || wait.Timeout != DefaultServiceTimeout || wait.User != "1000" {
			t.Errorf("ready %+v: wait step %#v, want probe %q", c.ready, wait, c.probe)
		}
		if (wait.Env != nil) != c.env {
			t.Errorf("ready %+v: probe env %v, want env=%v", c.ready, wait.Env, c.env)
		}
		wantStart := []string{ag, "service", "--log", "/.sandbox/run/web.log", "--pidfile", "/.sandbox/run/web.pid", "--workdir", "/w", "--", "srv"}
		if !reflect.DeepEqual(start.Command, wantStart) || start.User != "1000" {
			t.Errorf("start step %#v", start)
		}
	}
}

func TestExpandMain(t *testing.T) {
	env := map[string]string{"TASK": "it's", "A": "1"}
	got := mustExpand(t, Input{Kind: "main", Settings: map[string]string{"owner": "1000:1000"}, Env: env,
		Commands: [][]string{{"ls"}}})
	equal(t, got, Plan{
		Kind: "main",
		Steps: []Step{
			{Kind: StepRun, Description: "create workspace", Command: []string{"mkdir", "-p", "/workspace"}, User: "0"},
			{Kind: StepRun, Description: "set workspace mode", Command: []string{"chmod", "0755", "/workspace"}, User: "0"},
			{Kind: StepFiles, Description: "write env file", User: "0", Files: []driver.File{{
				Path: "/workspace/.env", Content: []byte("A='1'\nTASK='it'\\''s'\n"), Mode: 0o600}}},
			{Kind: StepRun, Description: "give workspace to 1000:1000", Command: []string{"chown", "-R", "1000:1000", "/workspace"}, User: "0"},
			{Kind: StepRun, Description: "command", Command: []string{"ls"}, Env: env, Workdir: "/workspace"},
		},
	})

	// An env file outside the workspace is chowned too; none skips it.
	got = mustExpand(t, Input{Kind: "main", Env: env, Settings: map[string]string{
		"workspace": "/w", "owner": "app", "env_file": "/etc/app.env", "mode": "0700"}})
	if last := got.Steps[len(got.Steps)-1]; !reflect.DeepEqual(last.Command, []string{"chown", "-R", "app", "/w", "/etc/app.env"}) {
		t.Errorf("chown step %q", last.Command)
	}
	got = mustExpand(t, Input{Kind: "main", Env: env, Settings: map[string]string{"env_file": "none"}})
	for _, st := range got.Steps {
		if st.Kind == StepFiles {
			t.Errorf("env_file=none still writes %v", st.Files[0].Path)
		}
	}
}

func TestExpandPython(t *testing.T) {
	got := mustExpand(t, Input{Kind: "python", Settings: map[string]string{
		"packages": "requests==2.32.3, numpy", "requirements": "/app/req.txt", "index_url": "https://pypi.example/simple",
	}, Service: &Service{Command: []string{"python", "app.py"}, Ready: Ready{TCPPort: 8000}}})
	env := map[string]string{"VIRTUAL_ENV": "/app/.venv", "PATH": "/app/.venv/bin:" + DefaultPath}
	log, pid := "/.sandbox/run/init.log", "/.sandbox/run/init.pid"
	equal(t, got, Plan{
		Kind: "python",
		Steps: []Step{
			{Kind: StepRun, Description: "create virtual environment", Command: []string{"python3", "-m", "venv", "/app/.venv"}, User: "0"},
			{Kind: StepRun, Description: "install python packages", User: "0", Command: []string{
				"/app/.venv/bin/pip", "install", "--disable-pip-version-check", "--no-input",
				"--index-url", "https://pypi.example/simple", "requests==2.32.3", "numpy", "-r", "/app/req.txt"}},
			{Kind: StepService, Description: "start service", Env: env, LogPath: log, PIDFile: pid,
				Command: []string{ag, "service", "--log", log, "--pidfile", pid, "--", "python", "app.py"}},
			{Kind: StepWait, Description: "wait for service readiness", LogPath: log, PIDFile: pid,
				Timeout: DefaultServiceTimeout, Command: []string{ag, "probe", "tcp", "8000"}},
		},
	})
	// Without packages there is no pip step; the user's PATH wins.
	got = mustExpand(t, Input{Kind: "python", Env: map[string]string{"PATH": "/mine"}, Commands: [][]string{{"python", "-V"}}})
	if len(got.Steps) != 2 || got.Steps[1].Env["PATH"] != "/mine" || got.Steps[1].Env["VIRTUAL_ENV"] != "/app/.venv" {
		t.Errorf("python without packages: %#v", got.Steps)
	}
}

func TestExpandNeo4j(t *testing.T) {
	got := mustExpand(t, Input{Kind: "neo4j", Settings: map[string]string{"password": "s3cret-pw", "heap": "512m"}})
	env := map[string]string{
		"NEO4J_AUTH":                             "neo4j/s3cret-pw",
		"NEO4J_USERNAME":                         "neo4j",
		"NEO4J_PASSWORD":                         "s3cret-pw",
		"NEO4J_server_http_listen__address":      "0.0.0.0:7474",
		"NEO4J_server_bolt_listen__address":      "0.0.0.0:7687",
		"NEO4J_server_default__listen__address":  "0.0.0.0",
		"NEO4J_server_memory_heap_initial__size": "512m",
		"NEO4J_server_memory_heap_max__size":     "512m",
	}
	log, pid := "/.sandbox/run/init.log", "/.sandbox/run/init.pid"
	equal(t, got, Plan{
		Kind:    "neo4j",
		Secrets: []string{"s3cret-pw"},
		Steps: []Step{
			{Kind: StepService, Description: "start service", Env: env, User: "0", LogPath: log, PIDFile: pid,
				Command: []string{ag, "service", "--log", log, "--pidfile", pid, "--workdir", "/var/lib/neo4j", "--",
					"/startup/docker-entrypoint.sh", "neo4j"}},
			{Kind: StepWait, Description: "wait for service readiness", User: "0", LogPath: log, PIDFile: pid,
				Timeout: 3 * time.Minute, Command: []string{ag, "probe", "http", "7474", "/", "200"}},
		},
	})
	// The user's timeout overrides the recipe's, the rest stays.
	got = mustExpand(t, Input{Kind: "neo4j", Settings: map[string]string{"password": "s3cret-pw"}, Service: &Service{Timeout: time.Second}})
	if w := got.Steps[1]; w.Timeout != time.Second || w.Command[2] != "http" {
		t.Errorf("timeout override: %#v", w)
	}
}

func TestExpandJoern(t *testing.T) {
	got := mustExpand(t, Input{Kind: "joern", Settings: map[string]string{"heap": "4g", "username": "u", "password": "pw"}})
	want := []string{"joern", "-J-Xmx4g", "--server", "--server-host", "0.0.0.0", "--server-port", "8080",
		"--server-auth-username", "u", "--server-auth-password", "pw"}
	if c := got.Steps[0].Command; !reflect.DeepEqual(c[len(c)-len(want):], want) {
		t.Errorf("joern service %q, want ... %q", c, want)
	}
	if w := got.Steps[1]; w.Timeout != 5*time.Minute || !reflect.DeepEqual(w.Command, []string{ag, "probe", "tcp", "8080"}) {
		t.Errorf("joern wait %#v", w)
	}
	if !reflect.DeepEqual(got.Secrets, []string{"pw"}) {
		t.Errorf("secrets %q", got.Secrets)
	}
}

func TestExpandGDBMCP(t *testing.T) {
	got := mustExpand(t, Input{Kind: "gdb_mcp", Settings: map[string]string{"target": "/work/a.out", "port": "9000", "command_timeout": "30"}})
	env := map[string]string{"SERVER_IP": "0.0.0.0", "SERVER_PORT": "9000", "GDB_COMMAND_TIMEOUT": "30", "GDB_MCP_TARGET": "/work/a.out"}
	if len(got.Steps) != 3 {
		t.Fatalf("steps %#v", got.Steps)
	}
	if c := got.Steps[0]; c.Kind != StepRun || c.Command[len(c.Command)-1] != "/work/a.out" || c.Env != nil {
		t.Errorf("target check %#v", c)
	}
	s := got.Steps[1]
	if !reflect.DeepEqual(s.Env, env) || !reflect.DeepEqual(s.Command[len(s.Command)-2:], []string{"mcp-server-gdb", "sse"}) {
		t.Errorf("service %#v", s)
	}
	if w := got.Steps[2]; !reflect.DeepEqual(w.Command, []string{ag, "probe", "tcp", "9000"}) || w.Timeout != time.Minute {
		t.Errorf("wait %#v", w)
	}
}

func TestExpandErrors(t *testing.T) {
	cases := []struct {
		in   Input
		want string
	}{
		{Input{Kind: "nope"}, `kind: "nope" is not a known kind`},
		{Input{Kind: "custom", Settings: map[string]string{"x": "1"}}, "settings.x: kind \"custom\" has no such setting"},
		{Input{Kind: "main", Settings: map[string]string{"workspace": "rel"}}, "settings.workspace: \"rel\" must be an absolute path"},
		{Input{Kind: "main", Settings: map[string]string{"mode": "999"}}, "settings.mode:"},
		{Input{Kind: "main", Settings: map[string]string{"owner": "a b"}}, "settings.owner:"},
		{Input{Kind: "python", Settings: map[string]string{"packages": "ok --index-url=x"}}, "settings.packages: \"--index-url=x\" looks like an option"},
		{Input{Kind: "python", Settings: map[string]string{"index_url": "ftp://x"}}, "settings.index_url:"},
		{Input{Kind: "neo4j"}, "settings.password: required"},
		{Input{Kind: "neo4j", Settings: map[string]string{"password": "short"}}, "settings.password: must be at least 8"},
		{Input{Kind: "neo4j", Settings: map[string]string{"password": "longenough", "heap": "lots"}}, "settings.heap:"},
		{Input{Kind: "neo4j", Settings: map[string]string{"password": "longenough", "http_port": "70000"}}, "settings.http_port:"},
		{Input{Kind: "joern", Settings: map[string]string{"username": "u"}}, "settings.username and settings.password"},
		{Input{Kind: "gdb_mcp", Settings: map[string]string{"command_timeout": "-1"}}, "settings.command_timeout:"},
		{Input{Files: []driver.File{{Path: "rel"}}}, "files[0].path"},
		{Input{Commands: [][]string{{"ok"}, {}}}, "commands[1]:"},
		{Input{OnDestroy: [][]string{{""}}}, "on_destroy[0]:"},
		{Input{Env: map[string]string{"A=B": "x"}}, "env:"},
		{Input{Name: "a/b"}, "name:"},
		{Input{Service: &Service{Ready: Ready{TCPPort: 1}}}, "service.command: required"},
		{Input{Service: &Service{Command: []string{"x"}, Ready: Ready{TCPPort: 1, Command: []string{"y"}}}}, "service.ready: set only one"},
		{Input{Service: &Service{Command: []string{"x"}, Ready: Ready{TCPPort: 70000}}}, "service.ready.tcp_port"},
		{Input{Service: &Service{Command: []string{"x"}, Ready: Ready{HTTP: &HTTPReady{Port: 80, Status: 42}}}}, "service.ready.http.status"},
	}
	for _, c := range cases {
		_, err := Expand(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Expand(%+v) = %v, want error containing %q", c.in, err, c.want)
		}
	}
}

func TestKindDocs(t *testing.T) {
	want := []string{"main", "python", "neo4j", "joern", "gdb_mcp", "custom"}
	if got := KindNames(); !reflect.DeepEqual(got, want) {
		t.Fatalf("KindNames() = %q, want %q", got, want)
	}
	for _, k := range Kinds() {
		doc := k.Documentation()
		if !strings.HasPrefix(doc, "`"+k.Name+"`: ") {
			t.Errorf("doc of %s: %q", k.Name, doc)
		}
		for _, s := range k.Settings {
			if s.Doc == "" || !strings.Contains(doc, "`"+s.Name+"`") {
				t.Errorf("kind %s setting %s undocumented", k.Name, s.Name)
			}
		}
	}
	if d := KindsDocumentation(); !strings.Contains(d, "(required)") || !strings.Contains(d, "(default `/app/.venv`)") {
		t.Errorf("KindsDocumentation lacks markers:\n%s", d)
	}
}
