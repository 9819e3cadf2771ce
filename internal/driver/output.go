package driver

import "github.com/sandboxfleet/terraform-provider-sandbox/internal/outcap"

// Output is the writer a driver collects one output stream of an exec in:
// it keeps the end of the stream that spec asks for, with spec.Mask masked.
func (spec ExecSpec) Output() *outcap.Capture {
	keep := spec.MaxOutput
	if keep <= 0 {
		keep = DefaultMaxOutput
	}
	return outcap.New(keep, spec.Mask)
}

// Collected is the result of a command that exited with code, from the
// writers Output returned for its streams.
func Collected(code int, stdout, stderr *outcap.Capture) ExecResult {
	res := ExecResult{ExitCode: code}
	res.Stdout, res.StdoutOmitted = stdout.Bytes()
	res.Stderr, res.StderrOmitted = stderr.Bytes()
	return res
}
