package incus

import (
	"fmt"
	"strings"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Incus has no labels: they are stored as config keys "user.<key>". Incus
// accepts any key after "user.", but keys with spaces or '=' break
// `incus config set` and the API's filter syntax, so anything outside
// [A-Za-z0-9._/-] is percent-encoded (as %XX per byte, '%' included).
// Keys valid under names.ValidateLabelKey never need it.
const userPrefix = "user."

// Config keys of our own that are not labels (never returned as labels).
const (
	// keyInternal prefixes settings the driver keeps for itself.
	keyInternal = userPrefix + "sandbox-internal."
	keyUser     = keyInternal + "user"    // default exec user ("uid[:gid]")
	keyWorkdir  = keyInternal + "workdir" // default exec directory
	keyCommand  = keyInternal + "command" // "1": the agent is PID 1
	keyCopied   = keyInternal + "copied"  // image property: copied in by resolveImage
)

func isSafeKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-' || c == '/'
}

// labelKey is the config key that stores label k.
func labelKey(k string) string {
	var b strings.Builder
	b.WriteString(userPrefix)
	for i := 0; i < len(k); i++ {
		c := k[i]
		if isSafeKeyByte(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// labelFromKey reverses labelKey; ok is false for keys that are not labels.
func labelFromKey(key string) (string, bool) {
	if !strings.HasPrefix(key, userPrefix) || strings.HasPrefix(key, keyInternal) {
		return "", false
	}
	s := key[len(userPrefix):]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+3], "%02X", &c); err == nil {
				b.WriteByte(c)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String(), true
}

// labelsToConfig writes labels into config as user.* keys.
func labelsToConfig(config, labels map[string]string) {
	for k, v := range labels {
		config[labelKey(k)] = v
	}
}

// labelsFromConfig extracts the labels from a config map.
func labelsFromConfig(config map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range config {
		if l, ok := labelFromKey(k); ok {
			out[l] = v
		}
	}
	return out
}

// objectLabels are the labels every object of this backend carries.
func (d *Driver) objectLabels(user map[string]string) map[string]string {
	return driver.ObjectLabels(d.backend, d.labels, user)
}

// ours reports whether config carries this backend's scope labels.
func (d *Driver) ours(config map[string]string) bool {
	for k, v := range driver.ScopeLabels(d.backend) {
		if config[labelKey(k)] != v {
			return false
		}
	}
	return true
}
