package apiserver

import (
	"bufio"
	"encoding/json"
	"net/http"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// streamBuffer is the size of the buffered writer a streamed answer goes through.
const streamBuffer = 64 << 10

// getServiceMap wraps the service map handler: the map is written one item at a time, so that
// answering for tens of thousands of Services costs the agent one item's encoding at a time
// instead of the whole answer twice over (json.MarshalIndent encodes, then indents). The bytes
// are those writeJSON would write.
func (h *handlers) getServiceMap(fn func(r *http.Request) (apiv1.ServiceMap, *apiError)) http.HandlerFunc {
	return getThen(fn, writeServiceMap)
}

// writeServiceMap writes m as an answer, one item at a time.
func writeServiceMap(w http.ResponseWriter, m apiv1.ServiceMap) {
	writeJSONHeader(w, http.StatusOK)
	bw := bufio.NewWriterSize(w, streamBuffer)
	if err := encodeServiceMap(bw, m); err != nil {
		klog.V(2).InfoS("Writing the service map answer stopped", "err", err)
		return
	}
	_ = bw.Flush()
}

// encodeServiceMap writes m as json.MarshalIndent(m, "", "  ") and a newline would, one item
// at a time.
func encodeServiceMap(w *bufio.Writer, m apiv1.ServiceMap) error {
	head, err := json.MarshalIndent(apiv1.ServiceMap{Kind: m.Kind, APIVersion: m.APIVersion}, "", "  ")
	if err != nil {
		return err
	}
	if m.Items == nil {
		_, err = w.Write(append(head, '\n'))
		return err
	}
	// head ends with `"items": null` and the closing brace: write it up to the list.
	const nullItems = "null\n}"
	_, _ = w.Write(head[:len(head)-len(nullItems)])
	if len(m.Items) == 0 {
		_, err = w.WriteString("[]\n}\n")
		return err
	}
	_, _ = w.WriteString("[\n")
	for i := range m.Items {
		item, err := json.MarshalIndent(&m.Items[i], "    ", "  ")
		if err != nil {
			return err
		}
		_, _ = w.WriteString("    ")
		_, _ = w.Write(item)
		sep := ",\n"
		if i == len(m.Items)-1 {
			sep = "\n"
		}
		if _, err := w.WriteString(sep); err != nil {
			return err
		}
	}
	_, err = w.WriteString("  ]\n}\n")
	return err
}
