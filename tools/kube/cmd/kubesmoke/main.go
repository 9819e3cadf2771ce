// Command kubesmoke proves that the test cluster runs Pods for real: through
// the API server only (as the provider will), it creates a Pod running the
// busybox image, waits until it runs, execs into it through the exec
// subresource (stdout, stderr and the exit code must come back), reads its
// logs, deletes it and waits until it is gone. Any difference is an error.
//
// Usage: kubesmoke -kubeconfig FILE [-namespace default] [-image REF]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
)

const logLine = "kubesmoke: started"

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	namespace := flag.String("namespace", "default", "namespace of the test Pod")
	image := flag.String("image", "docker.io/library/busybox:1.35", "image with /bin/sh and sleep")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up after this long")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("load kubeconfig %q: %v", *kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail("client for %s: %v", config.Host, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	s := smoke{config: config, client: client, namespace: *namespace, name: "kubesmoke-" + rand.String(6)}
	if err := s.run(ctx, *image); err != nil {
		fail("pod %s/%s on %s: %v", s.namespace, s.name, config.Host, err)
	}
}

type smoke struct {
	config    *rest.Config
	client    kubernetes.Interface
	namespace string
	name      string
}

func (s smoke) run(ctx context.Context, image string) (err error) {
	start := time.Now()
	if err := s.create(ctx, image); err != nil {
		return err
	}
	// The Pod is deleted also when a check fails: nothing is left behind.
	defer func() {
		if derr := s.delete(context.WithoutCancel(ctx)); err == nil {
			err = derr
		}
	}()
	if err := s.waitRunning(ctx); err != nil {
		return err
	}
	step("running", start)

	execStart := time.Now()
	stdout, stderr, code, err := s.exec(ctx, "echo out; echo err >&2; exit 3")
	if err != nil {
		return err
	}
	if stdout != "out\n" || stderr != "err\n" || code != 3 {
		return fmt.Errorf("exec: got stdout %q, stderr %q, exit code %d; want \"out\\n\", \"err\\n\", 3", stdout, stderr, code)
	}
	step("exec (stdout, stderr, exit code 3)", execStart)

	logs, err := s.client.CoreV1().Pods(s.namespace).GetLogs(s.name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	if !strings.Contains(string(logs), logLine) {
		return fmt.Errorf("logs: got %q, want a line %q", logs, logLine)
	}
	step("logs", start)
	return nil
}

func (s smoke) create(ctx context.Context, image string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: map[string]string{"app.kubernetes.io/managed-by": "kubesmoke"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: corev1.PullNever, // no registry is reachable
				Command:         []string{"sh", "-c", "echo " + logLine + "; exec sleep 3600"},
			}},
		},
	}
	_, err := s.client.CoreV1().Pods(s.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	return nil
}

func (s smoke) waitRunning(ctx context.Context) error {
	var last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pod, err := s.client.CoreV1().Pods(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = pod
		switch pod.Status.Phase {
		case corev1.PodRunning:
			return true, nil
		case corev1.PodFailed, corev1.PodSucceeded:
			return false, fmt.Errorf("pod ended in phase %s", pod.Status.Phase)
		}
		return false, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("wait for Running: %w (phase %s, conditions %v, containers %v)",
			err, last.Status.Phase, last.Status.Conditions, last.Status.ContainerStatuses)
	}
	return err
}

// exec runs script in the Pod through the exec subresource: WebSocket first,
// SPDY when the server does not upgrade, as kubectl does.
func (s smoke) exec(ctx context.Context, script string) (stdout, stderr string, code int, err error) {
	req := s.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.namespace).Name(s.name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: "main",
		Command:   []string{"sh", "-c", script},
		Stdout:    true,
		Stderr:    true,
	}, scheme.ParameterCodec)
	websocket, err := remotecommand.NewWebSocketExecutor(s.config, "GET", req.URL().String())
	if err != nil {
		return "", "", 0, fmt.Errorf("exec: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(s.config, "POST", req.URL())
	if err != nil {
		return "", "", 0, fmt.Errorf("exec: %w", err)
	}
	executor, err := remotecommand.NewFallbackExecutor(websocket, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", 0, fmt.Errorf("exec: %w", err)
	}
	var out, errOut bytes.Buffer
	err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	var exit interface{ ExitStatus() int }
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0, nil
	case errors.As(err, &exit):
		return out.String(), errOut.String(), exit.ExitStatus(), nil
	default:
		return "", "", 0, fmt.Errorf("exec: %w (stderr %q)", err, errOut.String())
	}
}

func (s smoke) delete(ctx context.Context) error {
	start := time.Now()
	pods := s.client.CoreV1().Pods(s.namespace)
	if err := pods.Delete(ctx, s.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, s.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("wait for deletion: %w", err)
	}
	step("deleted", start)
	return nil
}

func step(what string, since time.Time) {
	fmt.Printf("kubesmoke: %-36s %6.1fs\n", what, time.Since(since).Seconds())
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kubesmoke: "+format+"\n", args...)
	os.Exit(1)
}
