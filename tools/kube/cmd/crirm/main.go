// Command crirm stops and removes every pod sandbox of a CRI runtime, so that
// containerd itself releases what it holds on the host (network namespaces,
// CNI addresses on the bridge, mounts) before it is stopped. crictl would do
// this, but it is not available from the module proxy here.
//
// Usage: crirm -endpoint unix:///run/sandbox-kube/containerd/containerd.sock
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	endpoint := flag.String("endpoint", "", "CRI endpoint (unix:///path/to/containerd.sock)")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "crirm: -endpoint is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	removed, err := removeAll(ctx, *endpoint)
	fmt.Printf("crirm: removed %d pod sandboxes\n", removed)
	if err != nil {
		fmt.Fprintf(os.Stderr, "crirm: %s: %v\n", *endpoint, err)
		os.Exit(1)
	}
}

func removeAll(ctx context.Context, endpoint string) (int, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	client := runtime.NewRuntimeServiceClient(conn)
	list, err := client.ListPodSandbox(ctx, &runtime.ListPodSandboxRequest{})
	if err != nil {
		return 0, fmt.Errorf("list pod sandboxes: %w", err)
	}
	var firstErr error
	removed := 0
	for _, sandbox := range list.Items {
		// Stop runs the CNI DEL and unmounts the network namespace; Remove
		// deletes the containers and the sandbox's state.
		if _, err := client.StopPodSandbox(ctx, &runtime.StopPodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("stop pod sandbox %s (%s/%s): %w", sandbox.Id, sandbox.Metadata.GetNamespace(), sandbox.Metadata.GetName(), err)
		}
		if _, err := client.RemovePodSandbox(ctx, &runtime.RemovePodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("remove pod sandbox %s (%s/%s): %w", sandbox.Id, sandbox.Metadata.GetNamespace(), sandbox.Metadata.GetName(), err)
			}
			continue
		}
		removed++
	}
	return removed, firstErr
}
