package kubernetes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// coreClient makes the few core/v1 calls the provider needs over a REST
// client whose scheme holds core/v1 alone. client-go's typed clients
// import k8s.io/client-go/kubernetes/scheme, which registers every API
// group when the process starts: every agentctl command would pay for it
// (docs/benchmarks-kubernetes.md), and the binary would carry them all.
type coreClient struct {
	rc     *rest.RESTClient
	params runtime.ParameterCodec
}

func newCoreClient(cfg *rest.Config) (*coreClient, error) {
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		return nil, fmt.Errorf("core/v1 scheme: %w", err)
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = "agentctl"
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &coreClient{rc: rc, params: runtime.NewParameterCodec(sch)}, nil
}

// The resources the provider uses.
const (
	resPods     = "pods"
	resClaims   = "persistentvolumeclaims"
	resServices = "services"
	resEvents   = "events"
)

func (c *coreClient) get(ctx context.Context, ns, res, name string, out runtime.Object) error {
	return c.rc.Get().Namespace(ns).Resource(res).Name(name).Do(ctx).Into(out)
}

func (c *coreClient) create(ctx context.Context, ns, res string, in, out runtime.Object) error {
	return c.rc.Post().Namespace(ns).Resource(res).Body(in).Do(ctx).Into(out)
}

func (c *coreClient) list(ctx context.Context, ns, res string, opts metav1.ListOptions, out runtime.Object) error {
	return c.rc.Get().Namespace(ns).Resource(res).VersionedParams(&opts, c.params).Do(ctx).Into(out)
}

func (c *coreClient) delete(ctx context.Context, ns, res, name string, opts metav1.DeleteOptions) error {
	return c.rc.Delete().Namespace(ns).Resource(res).Name(name).Body(&opts).Do(ctx).Error()
}

func (c *coreClient) getPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	var pod corev1.Pod
	if err := c.get(ctx, ns, resPods, name, &pod); err != nil {
		return nil, err
	}
	return &pod, nil
}
