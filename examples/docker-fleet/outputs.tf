output "endpoints" {
  description = "Where each sandbox's HTTP server is reached from this machine (loopback_ip on the local socket) or from the network (remote hosts)."
  value       = { for k, w in sandbox_instance.worker : k => w.endpoints["http"] }
}

output "status" {
  value = { for k, w in sandbox_instance.worker : k => w.status }
}

output "answers" {
  description = "What each server answered from inside its sandbox."
  value       = { for k, i in sandbox_initializer.ready : k => trimspace(i.results[0].stdout) }
}
