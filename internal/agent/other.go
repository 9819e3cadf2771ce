//go:build !linux

package agent

import (
	"errors"
	"io"
)

// The agent runs inside Linux sandboxes only; elsewhere the provider still
// builds, and these commands say why they cannot run.

var errNotLinux = errors.New("the sandbox agent runs on Linux only")

func runInit(_ []string, stderr io.Writer) int {
	return usageError(stderr, "init: %v", errNotLinux)
}

func runService(_ []string, stderr io.Writer) int {
	return usageError(stderr, "service: %v", errNotLinux)
}

func runExec(_ []string, stderr io.Writer) int {
	return usageError(stderr, "exec: %v", errNotLinux)
}

func probePID(string) error { return errNotLinux }

func powerOff() error { return errNotLinux }
