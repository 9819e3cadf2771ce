package provider

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"
)

// Diagnostics follow one shape: a Title Case summary ("Unable to Create
// Sandbox Image"), and a detail that names the backend, the object and the
// cause, then says what the user can do. Resources build them here so the
// wording stays the same everywhere.

// summary builds "Unable to <Action> <Kind>", e.g. summary("Create", "Sandbox Instance").
func summary(action, kind string) string {
	return fmt.Sprintf("Unable to %s %s", action, kind)
}

// driverError is the diagnostic for a failed driver call on object (e.g.
// `instance "worker-0"`) of the backend cfg. The advice follows the error's
// sentinel.
func driverError(sum string, cfg driver.Config, object string, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic(sum, driverErrorDetail(cfg, object, err))
}

// driverAttributeError is driverError attached to an attribute path.
func driverAttributeError(at path.Path, sum string, cfg driver.Config, object string, err error) diag.Diagnostic {
	return diag.NewAttributeErrorDiagnostic(at, sum, driverErrorDetail(cfg, object, err))
}

func driverErrorDetail(cfg driver.Config, object string, err error) string {
	return fmt.Sprintf("%s: %s failed: %v.\n\n%s", backendLabel(cfg), object, err, advice(cfg, err))
}

// backendLabel names a backend the way diagnostics do: `docker backend "gpu" (ssh://ubuntu@gpu-1)`.
func backendLabel(cfg driver.Config) string {
	s := fmt.Sprintf("%s backend %q", orUnknown(cfg.Driver), cfg.Name)
	if ep := endpoint(cfg); ep != "" {
		s += " (" + ep + ")"
	}
	return s
}

// endpoint is where the backend lives, for messages.
func endpoint(cfg driver.Config) string {
	switch {
	case cfg.Docker != nil:
		return cfg.Docker.Host
	case cfg.Incus != nil:
		if cfg.Incus.Address == "" {
			return "local socket"
		}
		return cfg.Incus.Address
	case cfg.Kubernetes != nil:
		return cfg.Kubernetes.Kubeconfig
	case cfg.Local != nil:
		return cfg.Local.Root
	}
	return ""
}

// advice says what to do about err.
func advice(cfg driver.Config, err error) string {
	var hk *sshconn.HostKeyError
	var advised *driver.AdvisedError
	switch {
	case errors.As(err, &advised):
		return advised.Advice
	case errors.As(err, &hk):
		return hostKeyAdvice
	case errors.Is(err, sshconn.ErrAuth):
		return sshAuthAdvice
	case strings.Contains(err.Error(), "x509:") || strings.Contains(err.Error(), "tls: "):
		return tlsAdvice
	case errors.Is(err, driver.ErrInvalid):
		return "The engine was reached, but the configuration cannot work as written (see the cause above). " +
			"Fix the attribute it names (a `command` that exists in the image, an `archive` that is a tar file, ...) and run Terraform again."
	case errors.Is(err, driver.ErrUnavailable) || connectionFailed(err):
		return fmt.Sprintf("Check that the %s engine is running and reachable at %s with the configured credentials, then run Terraform again.",
			orUnknown(cfg.Driver), orUnknown(endpoint(cfg)))
	case errors.Is(err, driver.ErrAlreadyExists):
		return "An object with this name already exists on the engine and is not managed by this configuration. " +
			"Choose another name, remove the object, or bring it under management with `terraform import`."
	case errors.Is(err, driver.ErrInUse):
		return fmt.Sprintf("Objects the backend did not delete still use it. If Terraform does not manage them, remove them "+
			"(they carry the label %s=%s) and run Terraform again.", driver.LabelBackend, cfg.Name)
	case errors.Is(err, driver.ErrUnsupported):
		return "This backend cannot do this. Change the configuration or use a backend whose `capabilities` include what is needed."
	case errors.Is(err, driver.ErrNotFound) && strings.Contains(strings.ToLower(err.Error()), "image"):
		return "The image does not exist on the engine. Fix `image`: use `sandbox_image.NAME.image_id` of an image on this backend, " +
			"or a reference the backend already has."
	case errors.Is(err, driver.ErrNotFound):
		return "The object does not exist on the engine. Check the name, or run `terraform apply` to create what is missing."
	}
	return "Check the engine's logs for the cause, fix it, and run Terraform again."
}

const (
	hostKeyAdvice = "The SSH server did not offer the host key this backend trusts. The handle records the key's fingerprint " +
		"(`handle.settings.host_key_fingerprint`, from `docker.host_key_fingerprint` or else from `docker.known_hosts_file` at plan time), " +
		"and every resource on the backend verifies exactly that key. If the key changed legitimately (verify it out of band), " +
		"trust the new key in the known_hosts file or pin it with `docker.host_key_fingerprint`: the handle then changes in the plan. " +
		"Refreshing uses the handle in state, so apply that change once with `terraform apply -refresh=false`."
	sshAuthAdvice = "The SSH server refused every key offered. Keys are offered in this order: `docker.ssh_key_file` (decrypted with the " +
		"passphrase in the environment variable named by `docker.ssh_key_passphrase_env`), the keys of the ssh-agent at `SSH_AUTH_SOCK`, " +
		"then the provider's `ssh_private_key`. Add one of their public keys to the server's authorized_keys for the user in `docker.host`."
	tlsAdvice = "The TLS handshake with the Docker daemon failed. Check that `docker.tls_ca_file` holds the CA that signed the daemon's " +
		"certificate, that the certificate names the host in `docker.host`, and that `docker.tls_cert_file` / `docker.tls_key_file` " +
		"are a client certificate the daemon's `--tlscacert` trusts."
)

// connectionFailed recognises a failed dial that no driver mapped to
// ErrUnavailable (e.g. an SSH connection refused while planning).
func connectionFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "no route to host") ||
		strings.Contains(s, "i/o timeout") || strings.Contains(s, "ssh: handshake failed")
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
