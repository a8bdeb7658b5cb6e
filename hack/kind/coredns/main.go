// Command coredns is CoreDNS with the plugins kubeadm's Corefile uses and
// nothing else, for kind's node image (hack/kind/node-image.sh): CoreDNS's
// own build links every plugin (cloud DNS providers' SDKs among them),
// which triples the build. Plugins register when imported; the directive
// order is CoreDNS's own (dnsserver.Directives). Never shipped.
package main

import (
	"github.com/coredns/coredns/coremain"

	// The plugins of kubeadm v1.37's Corefile, and log for debugging.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
