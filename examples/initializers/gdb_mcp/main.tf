# Kind "gdb_mcp": a GDB MCP server over the network (SSE), by default
# `mcp-server-gdb sse` from github.com/pansila/mcp_server_gdb, with SERVER_IP
# and SERVER_PORT in its environment; ready when its port accepts connections.
#
# Image: built FROM the Debian fixture of `scripts/fixtures.sh debian` (gdb is
# in it) plus the mcp-server-gdb release binary, which you download into
# ./img/ first (it is not packaged by Debian). No registry is needed.

terraform {
  required_providers {
    sandbox = { source = "sandboxfleet/sandbox" }
  }
}

resource "sandbox_backend" "docker" {
  name   = "init-gdb"
  docker = {}
}

resource "sandbox_image" "gdb" {
  backend = sandbox_backend.docker.handle
  name    = "sandbox-example/gdb-mcp:1"
  build   = { context = "${path.module}/img" }
}

resource "sandbox_instance" "debugger" {
  backend = sandbox_backend.docker.handle
  image   = sandbox_image.gdb.image_id
  name    = "debugger"
  command = ["sleep", "infinity"]
  ports   = [{ name = "mcp", port = 8080 }]
  # gdb needs ptrace to run the target.
  security = { capabilities = { add = ["SYS_PTRACE"] } }
}

resource "sandbox_initializer" "gdb" {
  instance = sandbox_instance.debugger.handle
  kind     = "gdb_mcp"
  settings = { port = "8080", target = "/usr/bin/true", command_timeout = "30" }
}

output "mcp_endpoint" {
  description = "Point an MCP client at http://<this>/sse."
  value       = sandbox_instance.debugger.endpoints["mcp"]
}
