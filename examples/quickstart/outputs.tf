output "sandboxes" {
  description = "Each sandbox's status and identity."
  value = {
    for w in sandbox_instance.worker : w.name => {
      id         = w.id
      status     = w.status
      expires_at = w.expires_at
    }
  }
}

output "hello" {
  description = "What each sandbox answered."
  value       = [for i in sandbox_initializer.hello : trimspace(i.results[0].stdout)]
}
