package driver

// Label keys the provider puts on every object it creates. Drivers that have
// no labels (incus) store them as user.<key> config keys.
const (
	LabelManagedBy  = "sandbox.managed-by"
	LabelBackend    = "sandbox.backend"
	LabelName       = "sandbox.name"        // the instance/volume name as the user wrote it
	LabelExpiresAt  = "sandbox.expires-at"  // RFC 3339, when a lifetime is set
	LabelLoopbackIP = "sandbox.loopback-ip" // the 127.0.0.x of the loopback_ip strategy
	LabelPorts      = "sandbox.ports"       // name=port/proto,... so endpoints can be named on List
	LabelSourceHash = "sandbox.source-hash"
	LabelLifetime   = "sandbox.lifetime" // the instance's lifetime as the user wrote it (import)
	LabelMemory     = "sandbox.memory"   // the memory limit as the user wrote it at create (import)

	ManagedByValue = "terraform-provider-sandbox"
)

// ObjectLabels merges, in increasing priority, the provider-level labels, the
// user's labels and the provider's own labels for an object of backend.
func ObjectLabels(backend string, providerLabels, userLabels map[string]string) map[string]string {
	out := make(map[string]string, len(providerLabels)+len(userLabels)+2)
	for k, v := range providerLabels {
		out[k] = v
	}
	for k, v := range userLabels {
		out[k] = v
	}
	out[LabelManagedBy] = ManagedByValue
	out[LabelBackend] = backend
	return out
}

// ScopeLabels are the labels that identify every object of one backend; List
// calls filter on them.
func ScopeLabels(backend string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelBackend: backend}
}
