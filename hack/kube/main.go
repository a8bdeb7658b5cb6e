// Command kube is one test-only binary for a whole Kubernetes cluster on one
// machine: kube-apiserver, kube-scheduler, kube-controller-manager, kubelet,
// kube-proxy, kubeadm, kubectl, etcd and helm, chosen by the name it runs
// under (a symlink) or by its first argument (`kube kubectl get nodes`). One
// binary links the packages the nine share once: about a third of the size
// of separate binaries, in the same compile time. kube-proxy and kubeadm are
// for kind's node image (hack/kind), whose control-plane images are this
// binary under each command's name. Built and cached by hack/kube/build.sh;
// never shipped.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	helmcmd "helm.sh/helm/v4/pkg/cmd"
	helmkube "helm.sh/helm/v4/pkg/kube"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's and helm's auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubeadm "k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              proxy.NewProxyCommand,
}

func main() {
	name := filepath.Base(os.Args[0])
	if name == "kube" && len(os.Args) > 1 {
		os.Args = os.Args[1:]
		name = os.Args[0]
	}
	switch name {
	case "kubectl":
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	case "etcd":
		etcdmain.Main(os.Args)
		return
	case "helm":
		os.Exit(helm())
	case "kubeadm":
		kubeadmerrors.HandleError(kubeadm.Run())
		return
	}
	newCmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube: unknown command %q: kube-apiserver, kube-scheduler, kube-controller-manager, kubelet, kube-proxy, kubeadm, kubectl, etcd or helm\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(newCmd()))
}

func helm() int {
	helmkube.ManagedFieldsManager = "helm"
	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		return 1
	}
	if err := cmd.Execute(); err != nil {
		var cerr helmcmd.CommandError
		if errors.As(err, &cerr) {
			return cerr.ExitCode
		}
		return 1
	}
	return 0
}
