package names

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/distribution/reference"
)

// namesError checks that a refusal names the value (an empty one is said
// to be empty).
func namesError(t *testing.T, what, s string, err error) {
	t.Helper()
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) && (s != "" || !strings.Contains(err.Error(), "empty")) {
		t.Fatalf("%s %q: error %q does not name it", what, s, err)
	}
}

// dockerName is what Docker accepts as a container or volume name.
var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// FuzzValidateName: an accepted name is a DNS label of 1-63 characters that
// Docker takes as a container name and a file system as a directory name.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", "web-1", "0", strings.Repeat("a", 63), strings.Repeat("a", 64), "", "-a", "a-", "A", "a_b", "a.b", ".", "..", "a/b", "é", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateName(s)
		if err != nil {
			namesError(t, "name", s, err)
			return
		}
		if len(s) < 1 || len(s) > MaxNameLength || !dockerName.MatchString(s) || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
			t.Fatalf("name %q accepted", s)
		}
	})
}

// FuzzValidateImageName: an image name the provider accepts is one Docker's
// own reference parser accepts, with the same tag and digest.
func FuzzValidateImageName(f *testing.F) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, s := range []string{
		"debian", "debian:12", "library/debian:12-slim", "ghcr.io/org/img:v1", "localhost:5000/x", "localhost/x", "x@" + digest,
		"x:1@" + digest, "reg.io:443/a/b/c:t", "a__b", "a___b", "a--b", "a.b", "Debian", "debian:", ":12", "a/", "/a", "a//b",
		"reg.io:/x", "x@sha256:short", "x:" + strings.Repeat("t", 129), "UPPER.io/x", "a@b@" + digest, "-a", "a-", "[::1]:5000/x",
		"x:tag@", "", strings.Repeat("a/", 128) + "a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateImageName(s)
		if err != nil {
			namesError(t, "image name", s, err)
			return
		}
		ref, err := reference.ParseNormalizedNamed(s)
		if err != nil {
			t.Fatalf("image name %q accepted, but Docker refuses it: %v", s, err)
		}
		if tagged, ok := ref.(reference.Tagged); ok && !strings.Contains(s, ":"+tagged.Tag()) {
			t.Fatalf("image name %q: Docker reads the tag %q", s, tagged.Tag())
		}
		if digested, ok := ref.(reference.Digested); ok && !strings.HasSuffix(s, "@"+digested.Digest().String()) {
			t.Fatalf("image name %q: Docker reads the digest %q", s, digested.Digest())
		}
	})
}

// FuzzValidateLabelKey: an accepted label key is outside the reserved
// prefix and within Kubernetes' limits (prefix up to 253, name 1-63).
func FuzzValidateLabelKey(f *testing.F) {
	for _, s := range []string{
		"team", "app.kubernetes.io/name", "a_b.c-d", "sandbox.name", "x/sandbox.y", "", "/a", "a/", "a/b/c", "-a", "a-",
		"A/b", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a.", 127) + "a/b", "a b", "é",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		err := ValidateLabelKey(k)
		if err != nil {
			namesError(t, "label key", k, err)
			return
		}
		prefix, name, hasPrefix := strings.Cut(k, "/")
		if !hasPrefix {
			prefix, name = "", prefix
		}
		if strings.HasPrefix(k, ReservedLabelPrefix) || len(prefix) > 253 || name == "" || len(name) > 63 ||
			strings.Contains(name, "/") || strings.ContainsAny(k, " \t\n=\x00") {
			t.Fatalf("label key %q accepted", k)
		}
	})
}

// FuzzValidateLabelValue: an accepted value is at most 255 bytes on one
// line, with no control character.
func FuzzValidateLabelValue(f *testing.F) {
	for _, s := range []string{"", "prod", "a b", "é", strings.Repeat("v", 255), strings.Repeat("v", 256), "a\nb", "a\x00", "\u0085", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		err := ValidateLabelValue(v)
		if err != nil {
			namesError(t, "label value", v, err)
			return
		}
		if len(v) > MaxLabelValueLength || strings.ContainsAny(v, "\n\r\x00\x7f") {
			t.Fatalf("label value %q accepted", v)
		}
	})
}
