// Command terraform-provider-sandbox serves the sandbox Terraform provider.
//
// The same binary is also the in-sandbox agent: when invoked as
// `terraform-provider-sandbox agent ...` (or under the name sandbox-agent) it
// runs the agent instead of the plugin server, so drivers can mount or upload
// this one static file into every sandbox.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

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

	var debug, showVersion bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.BoolVar(&showVersion, "version", false, "print the version and exit")
	flag.Parse()

	if showVersion {
		fmt.Printf("terraform-provider-sandbox %s (commit %s)\n", version, commit)
		return
	}
	if !debug {
		quietSDKLogs()
	}

	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address:         registryAddress,
		Debug:           debug,
		ProtocolVersion: 6,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
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
