// Package local is the daemonless backend (driver "local"): TODO full doc.
package local
