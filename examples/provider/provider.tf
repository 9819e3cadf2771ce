terraform {
  required_providers {
    sandbox = {
      source = "sandboxfleet/sandbox"
    }
  }
}

# The provider block is optional. Backends are resources (sandbox_backend), so
# one configuration can use several engines and hosts at once.
provider "sandbox" {
  # Added to every container, volume, image and directory the provider creates,
  # next to its own labels (managed-by, backend), so a leak can always be found.
  labels = {
    team = "evals"
  }

  # Used for ssh:// Docker hosts that set no ssh_key_file when ssh-agent offers
  # no key. Prefer the SANDBOX_SSH_PRIVATE_KEY environment variable; it is never
  # stored in state.
  # ssh_private_key = file("~/.ssh/id_ed25519")
}
