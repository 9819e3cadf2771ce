package initplan

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Kind names.
const (
	KindMain   = "main"
	KindPython = "python"
	KindNeo4j  = "neo4j"
	KindJoern  = "joern"
	KindGDBMCP = "gdb_mcp"
	KindCustom = "custom"
)

// Setting is one kind-specific option.
type Setting struct {
	Name     string
	Doc      string
	Default  string // "" with !Required: unset unless given
	Required bool
	check    func(string) error
}

// Kind is a built-in initializer recipe. Its Doc and Settings are the
// documentation; the same table drives validation, so the two cannot disagree.
type Kind struct {
	Name     string
	Doc      string
	Settings []Setting
	check    func(s map[string]string) error // across settings; optional
	expand   func(s map[string]string, in Input) recipe
}

// KindNames lists the kinds in documentation order.
func KindNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.Name
	}
	return out
}

// Kinds returns the built-in kinds.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// LookupKind finds a kind by name.
func LookupKind(name string) (Kind, bool) {
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Documentation renders the kind's doc and its settings as Markdown, for
// the provider's schema and docs.
func (k Kind) Documentation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s`: %s", k.Name, k.Doc)
	if len(k.Settings) == 0 {
		b.WriteString(" Takes no settings.")
		return b.String()
	}
	b.WriteString(" Settings:")
	for _, s := range k.Settings {
		fmt.Fprintf(&b, "\n  - `%s`", s.Name)
		switch {
		case s.Required:
			b.WriteString(" (required)")
		case s.Default != "":
			fmt.Fprintf(&b, " (default `%s`)", s.Default)
		}
		fmt.Fprintf(&b, ": %s", s.Doc)
	}
	return b.String()
}

// KindsDocumentation documents every kind, one paragraph each.
func KindsDocumentation() string {
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = "- " + k.Documentation()
	}
	return strings.Join(parts, "\n")
}

// resolve validates user settings against the kind and fills defaults.
func (k Kind) resolve(user map[string]string) (map[string]string, error) {
	known := make(map[string]Setting, len(k.Settings))
	for _, s := range k.Settings {
		known[s.Name] = s
	}
	var unknown []string
	for name := range user {
		if _, ok := known[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("settings.%s: kind %q has no such setting (it takes: %s)", unknown[0], k.Name, k.settingNames())
	}
	out := make(map[string]string, len(k.Settings))
	for _, s := range k.Settings {
		v, given := user[s.Name]
		if !given || v == "" {
			if s.Required {
				return nil, fmt.Errorf("settings.%s: required for kind %q (%s)", s.Name, k.Name, s.Doc)
			}
			v = s.Default
		}
		if v != "" && s.check != nil {
			if err := s.check(v); err != nil {
				return nil, fmt.Errorf("settings.%s: %w", s.Name, err)
			}
		}
		out[s.Name] = v
	}
	if k.check != nil {
		if err := k.check(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (k Kind) settingNames() string {
	if len(k.Settings) == 0 {
		return "none"
	}
	names := make([]string, len(k.Settings))
	for i, s := range k.Settings {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Setting checks.

func checkAbsPath(v string) error {
	if !path.IsAbs(v) {
		return fmt.Errorf("%q must be an absolute path", v)
	}
	return nil
}

func checkPort(v string) error {
	p, err := strconv.Atoi(v)
	if err != nil || !validPort(p) {
		return fmt.Errorf("%q is not a port (1-65535)", v)
	}
	return nil
}

func checkPositiveInt(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a positive whole number", v)
	}
	return nil
}

// jvmSize matches JVM and Neo4j memory sizes: 512m, 2G, 1048576.
var jvmSize = regexp.MustCompile(`^[1-9][0-9]*[kKmMgG]?$`)

func checkJVMSize(v string) error {
	if !jvmSize.MatchString(v) {
		return fmt.Errorf("%q is not a size like 512m or 2g", v)
	}
	return nil
}

// ownerPattern: a user or uid, optionally :group or :gid.
var ownerPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)

func checkOwner(v string) error {
	if !ownerPattern.MatchString(v) {
		return fmt.Errorf("%q is not user[:group]", v)
	}
	return nil
}

func checkMode(v string) error {
	if n, err := strconv.ParseUint(v, 8, 32); err != nil || n > 0o7777 {
		return fmt.Errorf("%q is not an octal mode like 0755", v)
	}
	return nil
}

func checkProgram(v string) error {
	if strings.ContainsAny(v, " \t\n") {
		return fmt.Errorf("%q must be one program name or path, without arguments", v)
	}
	return nil
}

func checkHost(v string) error {
	if strings.ContainsAny(v, " \t\n/") {
		return fmt.Errorf("%q is not a host address", v)
	}
	return nil
}

func checkURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", v)
	}
	return nil
}

func checkMinLen(n int) func(string) error {
	return func(v string) error {
		if len(v) < n {
			return fmt.Errorf("must be at least %d characters", n)
		}
		return nil
	}
}

// splitList splits a space- or comma-separated list setting.
func splitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// checkPackages refuses options among package specifiers: they would reach
// pip's command line.
func checkPackages(v string) error {
	for _, p := range splitList(v) {
		if strings.HasPrefix(p, "-") {
			return fmt.Errorf("%q looks like an option, not a package", p)
		}
	}
	return nil
}
