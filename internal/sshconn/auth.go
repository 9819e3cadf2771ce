package sshconn

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// ErrAuth is wrapped by errors that mean the server refused every key offered.
var ErrAuth = errors.New("ssh authentication failed")

// credentials are the signers offered to the server, in order, plus notes
// on sources that were configured but unusable, for the error message.
type credentials struct {
	signers []ssh.Signer
	offered []string // what was offered, for messages
	notes   []string // why a configured source was skipped
	closers []func() error
}

// loadCredentials gathers the signers in the documented order: key file,
// ssh-agent, provider key. A source that fails is noted and skipped, so the
// next one can still work.
func loadCredentials(cfg Config) *credentials {
	cr := &credentials{}
	if cfg.KeyFile != "" {
		s, err := keyFileSigner(cfg.KeyFile, cfg.KeyPassphraseEnv)
		cr.add("key file "+cfg.KeyFile, err, s)
	}
	cr.addAgent()
	if cfg.PrivateKeyPEM != "" {
		s, err := ssh.ParsePrivateKey([]byte(cfg.PrivateKeyPEM))
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			err = errors.New("it is encrypted; give an unencrypted key, or use ssh_key_file with a passphrase")
		}
		cr.add("provider ssh_private_key", err, s)
	}
	return cr
}

// add records the signers of one source, skipping keys already offered
// (an agent often holds the same key as the key file).
func (cr *credentials) add(source string, err error, signers ...ssh.Signer) {
	if err != nil {
		cr.notes = append(cr.notes, fmt.Sprintf("%s skipped: %v", source, err))
		return
	}
	n := 0
	for _, s := range signers {
		if cr.has(s.PublicKey()) {
			continue
		}
		cr.signers = append(cr.signers, s)
		n++
	}
	switch {
	case len(signers) == 1 && n == 1:
		pub := signers[0].PublicKey()
		cr.offered = append(cr.offered, fmt.Sprintf("%s (%s %s)", source, pub.Type(), ssh.FingerprintSHA256(pub)))
	case n > 0:
		cr.offered = append(cr.offered, fmt.Sprintf("%s (%d keys)", source, n))
	}
}

func (cr *credentials) has(pub ssh.PublicKey) bool {
	blob := string(pub.Marshal())
	for _, s := range cr.signers {
		if string(s.PublicKey().Marshal()) == blob {
			return true
		}
	}
	return false
}

// addAgent adds the keys of the agent at SSH_AUTH_SOCK, if one is set. The
// agent connection must stay open until the handshake has signed.
func (cr *credentials) addAgent() {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		cr.add("ssh-agent", fmt.Errorf("SSH_AUTH_SOCK=%s: %w", sock, err))
		return
	}
	cr.closers = append(cr.closers, conn.Close)
	signers, err := agent.NewClient(conn).Signers()
	if err == nil && len(signers) == 0 {
		err = errors.New("the agent holds no keys")
	}
	cr.add("ssh-agent", err, signers...)
}

func (cr *credentials) close() {
	for _, f := range cr.closers {
		_ = f() // the agent socket: nothing to do about a failed close
	}
}

// method is the single public-key method offering every signer in order.
func (cr *credentials) method() (ssh.AuthMethod, error) {
	if len(cr.signers) == 0 {
		msg := "no SSH credentials: set ssh_key_file, load a key into ssh-agent (SSH_AUTH_SOCK), or set the provider's ssh_private_key"
		if len(cr.notes) > 0 {
			msg += " (" + strings.Join(cr.notes, "; ") + ")"
		}
		return nil, fmt.Errorf("%w: %s", ErrAuth, msg)
	}
	return ssh.PublicKeys(cr.signers...), nil
}

// authError explains a refused authentication: what was offered and what
// was skipped.
func (cr *credentials) authError(cfg Config, err error) error {
	msg := fmt.Sprintf("%s refused the keys offered: %s", cfg, strings.Join(cr.offered, ", "))
	if len(cr.notes) > 0 {
		msg += "; " + strings.Join(cr.notes, "; ")
	}
	return fmt.Errorf("%w: %s (check that one of these public keys is in the server's authorized_keys for %q): %v",
		ErrAuth, msg, cfg.User, err)
}

// keyFileSigner reads a private key file, decrypting it with the passphrase
// held by the environment variable passEnv when it is encrypted.
func keyFileSigner(path, passEnv string) (ssh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if !errors.As(err, &missing) {
		return s, err
	}
	if passEnv == "" {
		return nil, errors.New("the key is encrypted and no passphrase was given: set ssh_key_passphrase_env to the name of an environment variable holding the passphrase")
	}
	pass, ok := os.LookupEnv(passEnv)
	if !ok || pass == "" {
		return nil, fmt.Errorf("the key is encrypted and the passphrase variable %s is unset or empty", passEnv)
	}
	s, err = ssh.ParsePrivateKeyWithPassphrase(pem, []byte(pass))
	if err != nil {
		return nil, fmt.Errorf("decrypting with the passphrase from %s: %w", passEnv, err)
	}
	return s, nil
}
