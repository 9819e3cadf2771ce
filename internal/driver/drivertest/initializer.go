package drivertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/initplan"
)

// testInitializer runs a sandbox_initializer plan end to end: files,
// commands, a service started by the agent in the instance and its HTTP
// probe; then a service that never gets ready, whose error must carry the
// probe failure and the service's log.
func testInitializer(t *testing.T, s *suite) {
	sc := s.open(t)
	in := sc.create(t, sc.spec("init"))
	dir := "/tmp/" + uniqueName("drivertest")
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), OpTimeout)
		defer cancel()
		_, _ = sc.d.Exec(c, in.ID, driver.ExecSpec{Command: []string{"rm", "-rf", dir}})
	})
	// A random port: without isolation the host's ports are shared.
	port := 20000 + rand.IntN(20000)
	plan, err := initplan.Expand(initplan.Input{
		Name:     "web",
		Files:    []driver.File{{Path: dir + "/www/index.html", Content: []byte("hello-init\n"), Mode: 0o644}},
		Commands: [][]string{{"sh", "-c", "echo prepared; echo $GREETING > " + dir + "/state"}},
		Env:      map[string]string{"GREETING": "hi"},
		Service: &initplan.Service{
			Command: []string{"busybox", "httpd", "-f", "-p", fmt.Sprint(port), "-h", dir + "/www"},
			Ready:   initplan.Ready{HTTP: &initplan.HTTPReady{Port: port, Path: "/index.html", Status: 200}},
			Timeout: 60 * time.Second,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := initplan.Run(ctx(t), sc.d, in.ID, plan)
	if err != nil {
		t.Fatalf("initplan.Run: %v", err)
	}
	if len(res.Steps) != 2 || res.Steps[0].Stdout != "prepared\n" || res.ReadyAt.IsZero() {
		t.Errorf("results %+v", res)
	}
	sc.expectOutput(t, in.ID, "cat "+dir+"/state", "hi\n")
	sc.expectOutput(t, in.ID, fmt.Sprintf("busybox wget -q -O - http://127.0.0.1:%d/index.html", port), "hello-init\n")

	checkInitializerTimeout(t, sc, in.ID)
}

// checkInitializerTimeout: a service that exits at once never becomes ready.
func checkInitializerTimeout(t *testing.T, sc *scope, id string) {
	t.Helper()
	plan, err := initplan.Expand(initplan.Input{
		Name: uniqueName("broken"),
		Service: &initplan.Service{
			Command: []string{"sh", "-c", "echo broken-service-says-bye; exit 1"},
			Ready:   initplan.Ready{TCPPort: 1},
			Timeout: 3 * time.Second,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = initplan.Run(ctx(t), sc.d, id, plan)
	for _, want := range []string{"not ready after 3s", "has exited", "broken-service-says-bye"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("initializer timeout error %v\nlacks %q", err, want)
		}
	}
}
