// Package names holds the engine-neutral naming rules of the provider: which
// names backends, instances and volumes may have, what an image reference
// looks like, and which label keys and values are accepted. The rules are the
// intersection of what Docker, Incus, Kubernetes and a file system accept, so
// a configuration valid on one backend stays valid on another.
package names

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// MaxNameLength is the longest backend, instance or volume name (a DNS label).
const MaxNameLength = 63

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// NameRule describes ValidateName for documentation and messages.
const NameRule = "1-63 characters of lowercase letters, digits and '-', starting and ending with a letter or digit"

// ValidateName checks a backend, instance or volume name: a DNS label, valid
// as a Docker name, an Incus name, a Kubernetes name and a directory name.
func ValidateName(s string) error {
	if s == "" {
		return fmt.Errorf("the name is empty; it must have %s", NameRule)
	}
	if len(s) > MaxNameLength {
		return fmt.Errorf("the name %q is %d characters long; it must have %s", s, len(s), NameRule)
	}
	if !dnsLabel.MatchString(s) {
		return fmt.Errorf("the name %q is not valid; it must have %s", s, NameRule)
	}
	return nil
}

// Image references follow Docker's grammar: [host[:port]/]path[:tag][@digest],
// path components lowercase alphanumerics joined by '.', '_', '__' or '-'.
var (
	refComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	refHost      = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?$`)
	refTag       = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	imageID      = regexp.MustCompile(`^[a-f0-9]{64}$`)
	refDigest    = regexp.MustCompile(`^(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96}|sha512:[0-9a-f]{128})$`) // the algorithms Docker verifies
)

// ImageRule describes ValidateImageName for documentation and messages.
const ImageRule = "a reference like `repo/name:tag`: lowercase path components separated by '/', an optional registry host first, an optional `:tag` and `@digest`"

// ValidateImageName checks an image name (a Docker tag or an Incus alias).
func ValidateImageName(s string) error {
	if s == "" {
		return fmt.Errorf("the image name is empty; it must be %s", ImageRule)
	}
	if len(s) > 255 {
		return fmt.Errorf("the image name %q is longer than 255 characters", s)
	}
	if imageID.MatchString(s) {
		return fmt.Errorf("the image name %q is 64 hexadecimal characters, which Docker reads as an image ID; it must be %s", s, ImageRule)
	}
	rest := s
	if i := strings.Index(rest, "@"); i >= 0 {
		if !refDigest.MatchString(rest[i+1:]) {
			return fmt.Errorf("the image name %q has an invalid digest %q; it must be %s", s, rest[i+1:], ImageRule)
		}
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		if !refTag.MatchString(rest[i+1:]) {
			return fmt.Errorf("the image name %q has an invalid tag %q; a tag is up to 128 letters, digits, '_', '.' and '-'", s, rest[i+1:])
		}
		rest = rest[:i]
	}
	parts := strings.Split(rest, "/")
	// Docker measures the name with its registry: "debian" is docker.io/library/debian.
	full := rest
	if len(parts) == 1 {
		full = "docker.io/library/" + rest
	} else if !strings.ContainsAny(parts[0], ".:") && parts[0] != "localhost" {
		full = "docker.io/" + rest
	}
	if len(full) > 255 {
		return fmt.Errorf("the image name %q is too long: Docker reads it as %q, over 255 characters", s, full)
	}
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost") {
		if !refHost.MatchString(parts[0]) {
			return fmt.Errorf("the image name %q has an invalid registry host %q", s, parts[0])
		}
		parts = parts[1:]
	}
	for _, p := range parts {
		if !refComponent.MatchString(p) {
			return fmt.Errorf("the image name %q has an invalid path component %q; it must be %s", s, p, ImageRule)
		}
	}
	return nil
}

// ReservedLabelPrefix starts the keys the provider sets itself.
const ReservedLabelPrefix = "sandbox."

var (
	labelName   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$`)
	labelPrefix = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
)

// LabelKeyRule describes ValidateLabelKey for documentation and messages.
const LabelKeyRule = "an optional DNS-subdomain prefix and '/', then 1-63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit; keys starting with `sandbox.` are reserved"

// ValidateLabelKey checks a label key. The rule is Kubernetes' (the strictest
// engine), which Docker and Incus (as user.<key>) also accept.
func ValidateLabelKey(k string) error {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case strings.HasPrefix(k, ReservedLabelPrefix):
		return fmt.Errorf("the label key %q uses the reserved prefix %q, which the provider sets itself", k, ReservedLabelPrefix)
	case hasPrefix && (len(prefix) > 253 || !labelPrefix.MatchString(prefix)):
		return fmt.Errorf("the label key %q has an invalid prefix %q; a prefix is a lowercase DNS subdomain of up to 253 characters", k, prefix)
	case name == "" || len(name) > 63 || !labelName.MatchString(name):
		return fmt.Errorf("the label key %q is not valid; a key is %s", k, LabelKeyRule)
	}
	return nil
}

// MaxLabelValueLength bounds label values; engines store them as strings.
const MaxLabelValueLength = 255

// ValidateLabelValue checks a label value: any printable text on one line.
func ValidateLabelValue(v string) error {
	if len(v) > MaxLabelValueLength {
		return fmt.Errorf("the label value %q is %d bytes long; the limit is %d", v, len(v), MaxLabelValueLength)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("the label value %q contains a control character; values are one line of printable text", v)
		}
	}
	return nil
}
