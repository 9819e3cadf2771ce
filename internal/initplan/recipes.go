package initplan

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// DefaultPath is the PATH the python kind extends: the usual default of
// container engines, since the image's own PATH is not known at plan time.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// kinds in documentation order.
var kinds = []Kind{mainKind, pythonKind, neo4jKind, joernKind, gdbMCPKind, customKind}

var mainKind = Kind{
	Name: KindMain,
	Doc: "prepares a workspace. As root it creates `workspace` (mode `mode`), writes the initializer's `env` " +
		"to `env_file` as `KEY='value'` lines a shell can source (mode 0600), and gives both to `owner`. " +
		"The user's commands and service then run with `workspace` as their working directory.",
	Settings: []Setting{
		{Name: "workspace", Default: "/workspace", Doc: "absolute path of the workspace directory.", check: checkAbsPath},
		{Name: "owner", Doc: "`user[:group]` that receives the workspace (recursively) and the env file.", check: checkOwner},
		{Name: "mode", Default: "0755", Doc: "octal permissions of the workspace directory.", check: checkMode},
		{Name: "env_file", Doc: "where `env` is written; default `<workspace>/.env`, `none` to skip.", check: checkEnvFile},
	},
	expand: expandMain,
}

func checkEnvFile(v string) error {
	if v == "none" {
		return nil
	}
	return checkAbsPath(v)
}

func expandMain(s map[string]string, in Input) recipe {
	ws := s["workspace"]
	r := recipe{workdir: ws, setup: []Step{
		rootRun("create workspace", "mkdir", "-p", ws),
		rootRun("set workspace mode", "chmod", s["mode"], ws),
	}}
	envFile := s["env_file"]
	if envFile == "" {
		envFile = path.Join(ws, ".env")
	}
	owned := []string{ws}
	if envFile != "none" && len(in.Env) > 0 {
		r.setup = append(r.setup, Step{Kind: StepFiles, Description: "write env file", User: RootUser,
			Files: envFileOf(envFile, in.Env)})
		if !strings.HasPrefix(envFile, strings.TrimSuffix(ws, "/")+"/") {
			owned = append(owned, envFile)
		}
	}
	if owner := s["owner"]; owner != "" {
		r.setup = append(r.setup, rootRun("give workspace to "+owner, append([]string{"chown", "-R", owner}, owned...)...))
	}
	return r
}

var pythonKind = Kind{
	Name: KindPython,
	Doc: "creates a virtual environment with the image's own Python (`python -m venv <venv>`, as root) and " +
		"installs `packages` and `requirements` into it with `<venv>/bin/pip install`. The user's commands and " +
		"service run with `VIRTUAL_ENV` set and `<venv>/bin` first on `PATH`. Needs an image with Python 3 and " +
		"its venv module, and network access to the package index.",
	Settings: []Setting{
		{Name: "packages", Doc: "requirement specifiers separated by spaces or commas, e.g. `requests==2.32.3 numpy`.", check: checkPackages},
		{Name: "requirements", Doc: "absolute path of a requirements file inside the instance (e.g. copied in with `files`).", check: checkAbsPath},
		{Name: "venv", Default: "/app/.venv", Doc: "absolute path of the virtual environment.", check: checkAbsPath},
		{Name: "python", Default: "python3", Doc: "interpreter that creates the virtual environment.", check: checkProgram},
		{Name: "index_url", Doc: "package index for pip (`--index-url`).", check: checkURL},
		{Name: "owner", Doc: "`user[:group]` that receives the virtual environment, so it can install more.", check: checkOwner},
	},
	expand: expandPython,
}

func expandPython(s map[string]string, _ Input) recipe {
	venv := s["venv"]
	r := recipe{
		setup: []Step{rootRun("create virtual environment", s["python"], "-m", "venv", venv)},
		env: map[string]string{
			"VIRTUAL_ENV": venv,
			"PATH":        path.Join(venv, "bin") + ":" + DefaultPath,
		},
	}
	pkgs := splitList(s["packages"])
	if len(pkgs) > 0 || s["requirements"] != "" {
		argv := []string{path.Join(venv, "bin", "pip"), "install", "--disable-pip-version-check", "--no-input"}
		if u := s["index_url"]; u != "" {
			argv = append(argv, "--index-url", u)
		}
		argv = append(argv, pkgs...)
		if req := s["requirements"]; req != "" {
			argv = append(argv, "-r", req)
		}
		r.setup = append(r.setup, rootRun("install python packages", argv...))
	}
	if owner := s["owner"]; owner != "" {
		r.setup = append(r.setup, rootRun("give virtual environment to "+owner, "chown", "-R", owner, venv))
	}
	return r
}

var neo4jKind = Kind{
	Name: KindNeo4j,
	Doc: "starts Neo4j 5 in an image built on the official `neo4j` image: the service is `<entrypoint> neo4j` " +
		"run as root from `home` (the entrypoint drops to the neo4j user), configured through the entrypoint's " +
		"environment: `NEO4J_AUTH=neo4j/<password>`, `NEO4J_server_http_listen__address`, " +
		"`NEO4J_server_bolt_listen__address` and the memory settings. `NEO4J_USERNAME`/`NEO4J_PASSWORD` are set " +
		"for cypher-shell. Ready when `GET /` on `http_port` answers 200; default timeout 3m.",
	Settings: []Setting{
		{Name: "password", Required: true, Doc: "initial password of the `neo4j` user (at least 8 characters); masked in results.", check: checkMinLen(8)},
		{Name: "heap", Doc: "JVM heap, initial and max (`server.memory.heap.*`), e.g. `512m`.", check: checkJVMSize},
		{Name: "pagecache", Doc: "page cache size (`server.memory.pagecache.size`), e.g. `256m`.", check: checkJVMSize},
		{Name: "http_port", Default: "7474", Doc: "HTTP port.", check: checkPort},
		{Name: "bolt_port", Default: "7687", Doc: "Bolt port.", check: checkPort},
		{Name: "entrypoint", Default: "/startup/docker-entrypoint.sh", Doc: "the image's entrypoint script.", check: checkAbsPath},
		{Name: "home", Default: "/var/lib/neo4j", Doc: "Neo4j home, the service's working directory.", check: checkAbsPath},
	},
	expand: expandNeo4j,
}

func expandNeo4j(s map[string]string, _ Input) recipe {
	env := map[string]string{
		"NEO4J_AUTH":                            "neo4j/" + s["password"],
		"NEO4J_USERNAME":                        "neo4j",
		"NEO4J_PASSWORD":                        s["password"],
		"NEO4J_server_http_listen__address":     "0.0.0.0:" + s["http_port"],
		"NEO4J_server_bolt_listen__address":     "0.0.0.0:" + s["bolt_port"],
		"NEO4J_server_default__listen__address": "0.0.0.0",
	}
	if h := s["heap"]; h != "" {
		env["NEO4J_server_memory_heap_initial__size"] = h
		env["NEO4J_server_memory_heap_max__size"] = h
	}
	if p := s["pagecache"]; p != "" {
		env["NEO4J_server_memory_pagecache_size"] = p
	}
	return recipe{
		env:     env,
		secrets: []string{s["password"]},
		service: &Service{
			Command: []string{s["entrypoint"], "neo4j"},
			Workdir: s["home"],
			User:    RootUser,
			Ready:   Ready{HTTP: &HTTPReady{Port: atoi(s["http_port"]), Path: "/", Status: 200}},
			Timeout: 3 * time.Minute,
		},
	}
}

var joernKind = Kind{
	Name: KindJoern,
	Doc: "starts the Joern query server: `<binary> --server --server-host <host> --server-port <port>`, with " +
		"`--server-auth-username`/`--server-auth-password` when both are set and `-J-Xmx<heap>` for the JVM. " +
		"Queries are then POSTed to `/query-sync` on that port. Ready when the port accepts connections; " +
		"default timeout 5m (the JVM and its REPL start slowly).",
	Settings: []Setting{
		{Name: "binary", Default: "joern", Doc: "the joern launcher.", check: checkProgram},
		{Name: "host", Default: "0.0.0.0", Doc: "address the server binds.", check: checkHost},
		{Name: "port", Default: "8080", Doc: "server port.", check: checkPort},
		{Name: "username", Doc: "basic-auth user name (with `password`)."},
		{Name: "password", Doc: "basic-auth password (with `username`); masked in results."},
		{Name: "heap", Doc: "JVM max heap, e.g. `4g`.", check: checkJVMSize},
	},
	check:  checkJoern,
	expand: expandJoern,
}

func checkJoern(s map[string]string) error {
	if (s["username"] == "") != (s["password"] == "") {
		return fmt.Errorf("settings.username and settings.password: set both or neither")
	}
	return nil
}

func expandJoern(s map[string]string, _ Input) recipe {
	argv := []string{s["binary"]}
	if h := s["heap"]; h != "" {
		argv = append(argv, "-J-Xmx"+h)
	}
	argv = append(argv, "--server", "--server-host", s["host"], "--server-port", s["port"])
	var secrets []string
	if s["username"] != "" {
		argv = append(argv, "--server-auth-username", s["username"], "--server-auth-password", s["password"])
		secrets = []string{s["password"]}
	}
	return recipe{
		secrets: secrets,
		service: &Service{Command: argv, Ready: Ready{TCPPort: atoi(s["port"])}, Timeout: 5 * time.Minute},
	}
}

var gdbMCPKind = Kind{
	Name: KindGDBMCP,
	Doc: "starts a GDB MCP server over the network. The defaults fit `mcp-server-gdb` " +
		"(github.com/pansila/mcp_server_gdb): the service is `<binary> <args>` (`mcp-server-gdb sse`) with " +
		"`SERVER_IP`, `SERVER_PORT` and `GDB_COMMAND_TIMEOUT` in its environment. When `target` is set, a setup " +
		"step checks that it is an executable file and `GDB_MCP_TARGET` names it for clients. Ready when the " +
		"port accepts connections; default timeout 1m.",
	Settings: []Setting{
		{Name: "binary", Default: "mcp-server-gdb", Doc: "the MCP server program.", check: checkProgram},
		{Name: "args", Default: "sse", Doc: "its arguments, separated by spaces (the SSE transport by default)."},
		{Name: "host", Default: "0.0.0.0", Doc: "address the server binds (`SERVER_IP`).", check: checkHost},
		{Name: "port", Default: "8080", Doc: "server port (`SERVER_PORT`).", check: checkPort},
		{Name: "target", Doc: "absolute path of the binary to debug, checked to be executable.", check: checkAbsPath},
		{Name: "command_timeout", Doc: "seconds a GDB command may take (`GDB_COMMAND_TIMEOUT`).", check: checkPositiveInt},
	},
	expand: expandGDBMCP,
}

func expandGDBMCP(s map[string]string, _ Input) recipe {
	r := recipe{env: map[string]string{"SERVER_IP": s["host"], "SERVER_PORT": s["port"]}}
	if t := s["command_timeout"]; t != "" {
		r.env["GDB_COMMAND_TIMEOUT"] = t
	}
	if t := s["target"]; t != "" {
		r.env["GDB_MCP_TARGET"] = t
		r.setup = append(r.setup, Step{Kind: StepRun, Description: "check debug target",
			Command: []string{"sh", "-c", `test -f "$1" && test -x "$1" || { echo "target $1 is not an executable file" >&2; exit 1; }`, "sh", t}})
	}
	r.service = &Service{
		Command: append([]string{s["binary"]}, strings.Fields(s["args"])...),
		Ready:   Ready{TCPPort: atoi(s["port"])},
		Timeout: time.Minute,
	}
	return r
}

var customKind = Kind{
	Name: KindCustom,
	Doc:  "adds nothing: only the given files, commands, env, service and on_destroy run.",
	expand: func(map[string]string, Input) recipe {
		return recipe{}
	},
}

// rootRun is a setup command run as root.
func rootRun(desc string, argv ...string) Step {
	return Step{Kind: StepRun, Description: desc, Command: argv, User: RootUser}
}

// envFileOf renders env as sorted KEY='value' lines, quoted for sh.
func envFileOf(p string, env map[string]string) []driver.File {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s='%s'\n", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	return []driver.File{{Path: p, Content: []byte(b.String()), Mode: 0o600}}
}

// atoi converts a setting already checked to be a number.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
