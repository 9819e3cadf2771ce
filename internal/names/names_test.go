package names

import (
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	good := []string{"a", "gpu", "worker-0", "0abc", strings.Repeat("a", 63)}
	bad := []string{"", "-a", "a-", "A", "a_b", "a.b", "a b", strings.Repeat("a", 64), "ä"}
	for _, s := range good {
		if err := ValidateName(s); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateName(s); err == nil {
			t.Errorf("ValidateName(%q) = nil, want error", s)
		}
	}
}

func TestValidateImageName(t *testing.T) {
	good := []string{
		"busybox", "eval/python:3.12", "tf-acc-x:latest", "localhost:5000/a/b:v1",
		"registry.example.com/team/img", "a__b", "a.b-c_d", "img@sha256:" + strings.Repeat("a", 64),
		"img:1.0@sha256:" + strings.Repeat("0", 64),
	}
	bad := []string{
		"", "Busybox", "a/B", "img:", "img:-x", "/img", "img/", "a//b", "img@sha256:xyz",
		"img:" + strings.Repeat("t", 129), "a b", "-a",
		// Docker refuses digests other than sha256, sha384 and sha512 in lowercase hex.
		"img@0:" + strings.Repeat("0", 32), "img@SHA256:" + strings.Repeat("0", 64), "img@a:" + strings.Repeat("0", 32),
		"img@sha256:" + strings.Repeat("A", 64), "img@sha256:" + strings.Repeat("a", 63),
		strings.Repeat("0", 64),  // an image ID to Docker
		strings.Repeat("a", 240), // 258 characters as docker.io/library/aaa...
	}
	for _, s := range good {
		if err := ValidateImageName(s); err != nil {
			t.Errorf("ValidateImageName(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateImageName(s); err == nil {
			t.Errorf("ValidateImageName(%q) = nil, want error", s)
		}
	}
}

func TestValidateLabelKey(t *testing.T) {
	good := []string{"role", "Role", "app.kubernetes.io/name", "example.com/x_y", "a", "team-1", "com.example.key"}
	bad := []string{
		"", "/x", "x/", "-x", "x-", "a b", "sandbox.backend", "sandbox.anything",
		"Example.com/x", "a/b/c", strings.Repeat("k", 64), "é",
	}
	for _, s := range good {
		if err := ValidateLabelKey(s); err != nil {
			t.Errorf("ValidateLabelKey(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateLabelKey(s); err == nil {
			t.Errorf("ValidateLabelKey(%q) = nil, want error", s)
		}
	}
}

func TestValidateLabelValue(t *testing.T) {
	for _, s := range []string{"", "worker", "alice@example.com", "a b c", strings.Repeat("v", 255)} {
		if err := ValidateLabelValue(s); err != nil {
			t.Errorf("ValidateLabelValue(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"a\nb", "tab\there", strings.Repeat("v", 256)} {
		if err := ValidateLabelValue(s); err == nil {
			t.Errorf("ValidateLabelValue(%q) = nil, want error", s)
		}
	}
}
