// Command terraform-provider-sandbox serves the sandbox Terraform provider.
//
// The same binary is also the in-sandbox agent: when invoked as
// `terraform-provider-sandbox agent ...` (or under the name sandbox-agent) it
// runs the agent instead of the plugin server, so drivers can mount or upload
// this one static file into every sandbox.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/provider"
)

// Set by the release build (goreleaser, GNUmakefile) through -ldflags -X.
var (
	version = "dev"
	commit  = "none"
)

// registryAddress is where the provider is published.
const registryAddress = "registry.terraform.io/sandboxfleet/sandbox"

func main() {
	if agent.Invoked(os.Args) {
		os.Exit(agent.Main(os.Args))
	}

	var debugMode, showVersion bool
	flag.BoolVar(&debugMode, "debug", false, "run the provider with support for debuggers like delve")
	flag.BoolVar(&showVersion, "version", false, "print the version and exit")
	flag.Parse()

	if showVersion {
		fmt.Printf("terraform-provider-sandbox %s (commit %s)\n", version, commit)
		return
	}
	if !debugMode {
		quietSDKLogs()
	}
	relaxGC()
	defer startCPUProfile()()

	var opts []tf6server.ServeOpt
	if debugMode {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	server, err := provider.NewServer(version)()
	if err != nil {
		log.Fatal(err.Error())
	}
	err = tf6server.Serve(registryAddress, func() tfprotov6.ProviderServer { return server }, opts...)
	if err != nil {
		log.Fatal(err.Error())
	}
}

// relaxGC lets the heap grow to five times its live size between collections
// (Go's default is two) unless GOGC says otherwise. The plugin framework
// allocates heavily per attribute on every RPC while the live heap stays
// small (tens of MB for hundreds of instances): with the default, garbage
// collection took a fifth of the CPU of a 50-instance re-plan.
func relaxGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// startCPUProfile writes a CPU profile of this provider process to
// $SANDBOX_PROVIDER_CPUPROFILE/cpu-<pid>.pprof when that directory is set
// (a developer aid for `make bench`; see DEVELOPING.md). It returns the stop.
func startCPUProfile() func() {
	dir := os.Getenv("SANDBOX_PROVIDER_CPUPROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid())))
	if err != nil {
		log.Printf("[WARN] SANDBOX_PROVIDER_CPUPROFILE: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Printf("[WARN] SANDBOX_PROVIDER_CPUPROFILE: %v", err)
		_ = f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

// quietSDKLogs switches the plugin SDK's loggers off when Terraform is not
// logging (no TF_LOG* variable reaches the plugin). They default to TRACE:
// every RPC then formats JSON log lines that Terraform reads from the pipe
// and discards, about a third of the CPU of a 50-instance re-plan (measured
// by `make bench`). With any TF_LOG* set, nothing changes.
func quietSDKLogs() {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TF_LOG") || strings.HasPrefix(kv, "TF_ACC_LOG") {
			return
		}
	}
	for _, k := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_PROVIDER"} {
		_ = os.Setenv(k, "OFF")
	}
}
