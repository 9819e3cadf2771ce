package driver

import (
	"io/fs"
	"time"
)

// Capabilities a backend may report (sandbox_backend.capabilities).
const (
	CapContainers   = "containers"
	CapVMs          = "vms"
	CapBuild        = "image_build"
	CapPull         = "image_pull"
	CapArchive      = "image_archive"
	CapVolumes      = "volumes"
	CapPorts        = "ports"
	CapNetworkNone  = "network_none"
	CapNetworkIso   = "network_isolated"
	CapNetworkBrdg  = "network_bridge"
	CapCPULimit     = "cpu_limit"
	CapMemoryLimit  = "memory_limit"
	CapPidsLimit    = "pids_limit"
	CapDiskLimit    = "disk_limit"
	CapLifetime     = "lifetime"
	CapExec         = "exec"
	CapFiles        = "files"
	CapLoopbackPort = "port_loopback_ip"
	CapDynamicPort  = "port_dynamic"
)

// Info describes a reachable backend.
type Info struct {
	EngineVersion string
	OS            string
	Arch          string
	CPUs          int64
	MemoryBytes   int64
	Capabilities  []string
}

// Has reports whether the backend has capability c.
func (i Info) Has(c string) bool {
	for _, x := range i.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// ImageSpec declares an image. Exactly one of Build, Pull, Archive is set.
type ImageSpec struct {
	Name    string // tag (docker) or alias (incus)
	Build   *BuildSource
	Pull    *PullSource
	Archive *ArchiveSource
	Labels  map[string]string
}

type BuildSource struct {
	ContextDir string // local directory, uploaded to the engine
	Dockerfile string // relative to ContextDir; default "Dockerfile"
	Args       map[string]string
	Target     string
}

type PullSource struct {
	Ref string
}

type ArchiveSource struct {
	Path string // local file: image tarball, or a plain rootfs tarball
}

// Image is an image as observed on the engine.
type Image struct {
	Name   string
	ID     string // digest (docker) or fingerprint (incus)
	Labels map[string]string
}

// VolumeSpec declares a named volume, optionally seeded from a local directory.
type VolumeSpec struct {
	Name      string
	SourceDir string
	Labels    map[string]string
}

// Volume is a volume as observed on the engine.
type Volume struct {
	Name   string
	Labels map[string]string
}

// Instance types.
const (
	TypeContainer = "container"
	TypeVM        = "vm"
)

// Network modes.
const (
	NetworkNone     = "none"
	NetworkIsolated = "isolated" // the backend's own network
	NetworkBridge   = "bridge"   // the engine's default network, with egress
)

// PortSpec is a port inside the instance to publish on the host.
type PortSpec struct {
	Name     string
	Port     int
	Protocol string // "tcp" | "udp"
}

// File is a file to place in an instance. Exactly one of Content, Source.
type File struct {
	Path    string
	Content []byte
	Source  string // local path, read by the driver
	Mode    fs.FileMode
}

// Mount attaches a volume of the same backend.
type Mount struct {
	Volume   string
	Target   string
	ReadOnly bool
}

// Security holds the hardening defaults applied to every instance; each can
// be relaxed by the user.
type Security struct {
	NoNewPrivileges bool
	CapAdd          []string
	CapDrop         []string // "ALL" drops everything not in CapAdd
	Privileged      bool
	ReadOnlyRootfs  bool
	Init            bool // run an init process as PID 1 that reaps zombies
}

// InstanceSpec declares an instance.
type InstanceSpec struct {
	Name        string // unique within the backend
	Type        string // TypeContainer | TypeVM
	Image       string
	Command     []string // nil: the image's default
	Env         map[string]string
	Workdir     string
	User        string
	Labels      map[string]string
	CPUs        float64 // 0: unlimited
	MemoryBytes int64
	PidsLimit   int64 // 0: DefaultPidsLimit where it applies (EffectivePidsLimit); PidsUnlimited: none
	DiskBytes   int64
	Network     string
	Ports       []PortSpec
	Files       []File
	Mounts      []Mount
	Running     bool
	Lifetime    time.Duration // 0: none
	Security    Security
}

// Limits are the settings an instance can change in place.
type Limits struct {
	CPUs        float64
	MemoryBytes int64
	PidsLimit   int64 // as InstanceSpec.PidsLimit
}

// DefaultPidsLimit is the pids limit of a container whose spec leaves
// PidsLimit at 0, where the engine can limit processes: a fork bomb in
// untrusted code stops there instead of exhausting the host. Virtual machines
// get none (their kernel counts its own processes).
const DefaultPidsLimit = 4096

// PidsUnlimited as InstanceSpec.PidsLimit (or Limits.PidsLimit) asks for no
// pids limit at all, not even DefaultPidsLimit (`pids_limit = 0`).
const PidsUnlimited = -1

// EffectivePidsLimit resolves a requested pids limit for an instance of
// type typ: 0 gives DefaultPidsLimit to a container where the engine can
// enforce one (canLimit) and stays 0 (none) otherwise; PidsUnlimited and
// positive limits are returned as they are. Drivers apply a result > 0 as
// the limit and treat anything else as no limit.
func EffectivePidsLimit(requested int64, typ string, canLimit bool) int64 {
	if requested == 0 && typ != TypeVM && canLimit {
		return DefaultPidsLimit
	}
	return requested
}

// Instance states, normalised across engines.
const (
	StatusRunning = "running"
	StatusStopped = "stopped" // exited / stopped; kept
	StatusExpired = "expired" // stopped because its lifetime ran out
	StatusCreated = "created" // created, never started
	StatusUnknown = "unknown"
)

// Instance is an instance as observed on the engine.
type Instance struct {
	ID   string
	Name string // the user's name, unique within the backend
	// EngineName is what the engine calls the sandbox, for its own tools:
	// the Docker container or Incus instance name (`docker exec NAME`,
	// `incus exec NAME`), the local sandbox's directory.
	EngineName string
	Type       string
	Image      string
	Status     string
	IPAddress  string
	// Endpoints maps a port name to "host:port" where it is reached.
	Endpoints  map[string]string
	Labels     map[string]string
	LoopbackIP string // the 127.0.0.x allocated under the loopback_ip strategy
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: no lifetime
	// ExitCode is the main command's exit status when it ended by itself
	// (StatusStopped only, see ExitedByItself); nil while it runs, when it
	// was stopped by a signal (a stop from Terraform or outside it), or
	// when the engine does not say (incus).
	ExitCode *int
	// Spec is the configuration observed on the engine, for import: what
	// the engine reports of the create request (no file contents; Command
	// nil when it is the image's default, Env without the image's). Only
	// InspectInstance fills it, and only where the engine can tell (docker,
	// local); List leaves it nil.
	Spec *InstanceSpec
}

// ExitedByItself tells an exit status of a command that ended on its own
// from one of a command stopped from outside: a stop sends SIGTERM, then
// SIGKILL (128+15, 128+9; 130 for SIGINT), whether the engine or the
// agent as PID 1 reports it; 124 is the agent's lifetime expiry.
func ExitedByItself(code int) bool {
	switch code {
	case 124, 128 + 2, 128 + 9, 128 + 15:
		return false
	}
	return code >= 0
}

// Running reports whether the instance is running.
func (i Instance) Running() bool { return i.Status == StatusRunning }

// ExecSpec runs a command inside a running instance.
type ExecSpec struct {
	Command []string
	Env     map[string]string
	Workdir string
	User    string
	Stdin   []byte
	// Detach starts the command and returns at once, leaving it running after
	// the call; its output goes to LogPath inside the instance.
	Detach  bool
	LogPath string
	// MaxOutput is how many bytes of each output stream the result keeps:
	// the last ones. 0 means DefaultMaxOutput. The driver reads the rest and
	// lets it go, so endless output costs bounded memory.
	MaxOutput int
	// Mask lists values replaced by "(sensitive)" in the output as it is
	// read, before anything is cut: no part of one survives in the result.
	Mask []string
}

// DefaultMaxOutput is what an Exec keeps of each stream by default.
const DefaultMaxOutput = 1 << 20

// ExecResult is the outcome of a command. A command that ran and exited
// non-zero is not an error: ExitCode says so. Stdout and Stderr are the end
// of each stream (ExecSpec.MaxOutput); the Omitted counts say how many
// bytes came before it.
type ExecResult struct {
	ExitCode      int
	Stdout        []byte
	Stderr        []byte
	StdoutOmitted int64
	StderrOmitted int64
}
