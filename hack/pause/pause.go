// The real node's sandbox ("pause") container: holds the pod's namespaces and does nothing.
//
// Written here (not pulled) because no container registry is reachable on our machines:
// hack/realnode.py builds it with the Go toolchain (static, CGO_ENABLED=0) and packs it into an
// image archive for containerd. As PID 1 of the sandbox it exits on SIGINT/SIGTERM and reaps
// any child that is re-parented to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
