package loadbalancer

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

// CleanupInterval is how long RemoveFinalizers waits before listing the
// Services again, when a pass left some with the finalizer.
const CleanupInterval = 2 * time.Second

// RemoveFinalizers undoes, on every Service that carries a finalizer of the
// controller of class (ownsFinalizer), what antrea-controller wrote: it clears
// status.loadBalancer.ingress and the KEP-4631 conditions (nobody
// announces or proxies those addresses any more), then removes the
// announcing-node annotation and the finalizer, so that no Service is left
// unable to be deleted. It is what `antrea-controller cleanup-finalizers`
// runs from the chart's uninstall hook, and needs no running controller.
// It lists again until a pass finds no Service with the finalizer (a
// controller still shutting down may write once more), or ctx ends; it
// returns the number of Services it cleaned.
func RemoveFinalizers(ctx context.Context, client kubernetes.Interface, class string) (int, error) {
	cleaned := 0
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, CleanupInterval, true, func(ctx context.Context) (bool, error) {
		n, remaining, err := cleanupPass(ctx, client, class)
		cleaned += n
		lastErr = err
		if err != nil {
			klog.ErrorS(err, "Removing the LoadBalancer finalizer from Services; retrying", "remaining", remaining)
			return false, nil
		}
		return remaining == 0, nil
	})
	if err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w (last error: %v)", err, lastErr)
		}
		return cleaned, fmt.Errorf("removing finalizer %s (and %s) from Services: %w", lbapi.Finalizer, lbapi.LegacyFinalizer, err)
	}
	return cleaned, nil
}

// cleanupPass cleans every Service listed with the finalizer. It returns
// how many it cleaned and how many it could not.
func cleanupPass(ctx context.Context, client kubernetes.Interface, class string) (int, int, error) {
	list, err := client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 1, err
	}
	cleaned, remaining := 0, 0
	var firstErr error
	for i := range list.Items {
		svc := &list.Items[i]
		if !ownsFinalizer(svc, class) {
			continue
		}
		if err := cleanupService(ctx, client, svc, class); err != nil {
			remaining++
			if firstErr == nil {
				firstErr = fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err)
			}
			continue
		}
		cleaned++
		klog.InfoS("Removed the LoadBalancer finalizer", "service", klog.KObj(svc))
	}
	return cleaned, remaining, firstErr
}

// cleanupService unpublishes one Service, reading it again on a conflict.
func cleanupService(ctx context.Context, client kubernetes.Interface, svc *v1.Service, class string) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, err := client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			svc = fresh
		}
		first = false
		if !ownsFinalizer(svc, class) {
			return nil
		}
		return unpublish(ctx, client, svc)
	})
}

// unpublish clears the status antrea-controller wrote and removes its
// finalizer and the announcing-node annotation. A Service deleted
// meanwhile publishes nothing either.
func unpublish(ctx context.Context, client kubernetes.Interface, svc *v1.Service) error {
	st := svc.Status.DeepCopy()
	changed := len(st.LoadBalancer.Ingress) > 0
	st.LoadBalancer.Ingress = nil
	changed = conditions.Remove(&st.Conditions) || changed
	if changed {
		upd := svc.DeepCopy()
		upd.Status = *st
		out, err := client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		svc = out
	}
	upd := svc.DeepCopy()
	upd.Finalizers = withoutFinalizer(upd.Finalizers)
	delete(upd.Annotations, lbapi.AnnotationAnnouncingNode)
	if _, err := client.CoreV1().Services(svc.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
