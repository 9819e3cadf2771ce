package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"
)

// Driver names, as written in sandbox_backend and recorded in handles.
const (
	Docker     = "docker"
	Incus      = "incus"
	Kubernetes = "kubernetes"
	Local      = "local"
)

// Port strategies for publishing instance ports on the engine host.
const (
	PortStrategyLoopbackIP = "loopback_ip" // one 127.0.0.x per sandbox, same port numbers
	PortStrategyDynamic    = "dynamic"     // the engine picks host ports
)

// Config is everything needed to reach one backend. It is built from a
// sandbox_backend handle and therefore holds no secret values: secrets reach a
// driver only through Secrets, which come from the provider block or the
// environment and never enter state.
type Config struct {
	Driver string `json:"driver"`
	// Name is the backend's scope on the engine (network, project, directory).
	Name string `json:"name"`

	Docker     *DockerConfig     `json:"docker,omitempty"`
	Incus      *IncusConfig      `json:"incus,omitempty"`
	Kubernetes *KubernetesConfig `json:"kubernetes,omitempty"`
	Local      *LocalConfig      `json:"local,omitempty"`

	// Labels are the provider-level labels added to every object created.
	Labels map[string]string `json:"labels,omitempty"`

	// Secrets are never serialised and not part of Key().
	Secrets Secrets `json:"-"`
}

// Secrets are sensitive values from the provider configuration.
type Secrets struct {
	SSHPrivateKey string // PEM, from the provider's ssh_private_key
}

// DockerConfig reaches a Docker Engine API (or a compatible one).
type DockerConfig struct {
	Host string `json:"host"` // unix://, tcp://, ssh://; resolved (never empty) in a handle

	SSHKeyFile          string `json:"ssh_key_file,omitempty"`
	SSHKeyPassphraseEnv string `json:"ssh_key_passphrase_env,omitempty"`
	KnownHostsFile      string `json:"known_hosts_file,omitempty"`
	HostKeyFingerprint  string `json:"host_key_fingerprint,omitempty"`
	SSHJumpHost         string `json:"ssh_jump_host,omitempty"`
	RemoteSocket        string `json:"remote_socket,omitempty"` // socket path on the SSH host
	TLSCAFile           string `json:"tls_ca_file,omitempty"`
	TLSCertFile         string `json:"tls_cert_file,omitempty"`
	TLSKeyFile          string `json:"tls_key_file,omitempty"`
	AllowInsecureTCP    bool   `json:"allow_insecure_tcp,omitempty"`
	AdvertiseHost       string `json:"advertise_host,omitempty"`
	PortStrategy        string `json:"port_strategy,omitempty"`
	Internal            bool   `json:"internal,omitempty"`
}

// SSHConfig is the SSH connection of an ssh:// host: the same one for the
// driver and for the provider's plan-time host key lookup, so both share one
// pooled connection.
func (c DockerConfig) SSHConfig(sec Secrets) (sshconn.Config, error) {
	sc, err := sshconn.ParseURL(c.Host)
	if err != nil {
		return sshconn.Config{}, err
	}
	sc.KeyFile = c.SSHKeyFile
	sc.KeyPassphraseEnv = c.SSHKeyPassphraseEnv
	sc.KnownHostsFile = c.KnownHostsFile
	sc.HostKeyFingerprint = c.HostKeyFingerprint
	sc.JumpHost = c.SSHJumpHost
	sc.PrivateKeyPEM = sec.SSHPrivateKey
	return sc, nil
}

// IncusDefaultNetwork is the managed network of `isolated` Incus sandboxes
// when the backend names none.
const IncusDefaultNetwork = "incusbr0"

// IncusConfig reaches an Incus server.
type IncusConfig struct {
	// "" or unix://PATH: the local socket; https://host:8443: remote;
	// ssh://user@host[:port][/PATH]: the server's unix socket through SSH.
	Address           string `json:"address,omitempty"`
	ClientCertFile    string `json:"client_cert_file,omitempty"`
	ClientKeyFile     string `json:"client_key_file,omitempty"`
	ServerCertFile    string `json:"server_cert_file,omitempty"`
	ServerFingerprint string `json:"server_fingerprint,omitempty"`
	// TrustTokenEnv names the environment variable holding a trust token
	// (`incus config trust add`) used on first contact over https://; the
	// token itself never enters a handle or state.
	TrustTokenEnv      string `json:"trust_token_env,omitempty"`
	SSHKeyFile         string `json:"ssh_key_file,omitempty"`
	KnownHostsFile     string `json:"known_hosts_file,omitempty"`
	HostKeyFingerprint string `json:"host_key_fingerprint,omitempty"`
	Project            string `json:"project,omitempty"`
	StoragePool        string `json:"storage_pool,omitempty"`
	Network            string `json:"network,omitempty"`
	AdvertiseHost      string `json:"advertise_host,omitempty"`
	PortStrategy       string `json:"port_strategy,omitempty"`
}

// IncusDefaultRemoteSocket is the Incus socket on an SSH host unless the
// ssh:// address names a path.
const IncusDefaultRemoteSocket = "/var/lib/incus/unix.socket"

// SSHConfig is the SSH connection of an ssh:// address (shared with the
// provider's plan-time host key lookup through sshconn's pool).
func (c IncusConfig) SSHConfig(sec Secrets) (sshconn.Config, error) {
	sc, err := sshconn.ParseURL(c.Address)
	if err != nil {
		return sshconn.Config{}, err
	}
	sc.KeyFile = c.SSHKeyFile
	sc.KnownHostsFile = c.KnownHostsFile
	sc.HostKeyFingerprint = c.HostKeyFingerprint
	sc.PrivateKeyPEM = sec.SSHPrivateKey
	if sc.SocketPath == "" {
		sc.SocketPath = IncusDefaultRemoteSocket
	}
	return sc, nil
}

// KubernetesConfig reaches a Kubernetes API server.
type KubernetesConfig struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
}

// Isolation modes of the local driver.
const (
	IsolationBwrap = "bwrap"
	IsolationNone  = "none"
)

// LocalConfig is the daemonless backend: sandboxes are directories under Root.
type LocalConfig struct {
	Root      string `json:"root"`
	Isolation string `json:"isolation"`
}

// Key identifies a connection: two configs with the same Key share one
// connection in the provider process.
func (c Config) Key() string {
	c.Labels = nil
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
