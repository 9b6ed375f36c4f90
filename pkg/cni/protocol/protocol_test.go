package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseArgs(t *testing.T) {
	got, err := ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"IgnoreUnknown": "1", "K8S_POD_NAMESPACE": "default", "K8S_POD_NAME": "web-0",
		"K8S_POD_INFRA_CONTAINER_ID": "abc"}, got)
	got, err = ParseArgs("")
	require.NoError(t, err)
	require.Empty(t, got)
	for _, bad := range []string{"K8S_POD_NAME", "=x", "A=1;B"} {
		_, err := ParseArgs(bad)
		require.Error(t, err, bad)
	}
}

func TestParseNetConf(t *testing.T) {
	c, cerr := ParseNetConf([]byte(`{"cniVersion":"1.0.0","name":"antrea","type":"antrea-cni"}`))
	require.Nil(t, cerr)
	require.Equal(t, DefaultSocketPath, c.SocketPath)
	require.Equal(t, DefaultSpoolDir, c.DelSpoolDir)
	_, cerr = ParseNetConf([]byte(`[]`))
	require.Equal(t, ErrDecodingFailure, cerr.Code)
	_, cerr = ParseNetConf([]byte(`{"name":"x"}`))
	require.Equal(t, ErrInvalidNetworkConfig, cerr.Code)
}

func TestSpoolRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	reqs, bad, err := ReadSpool(dir)
	require.NoError(t, err, "a missing spool is empty")
	require.Empty(t, reqs)
	require.Empty(t, bad)

	a := Request{Command: CmdDel, ContainerID: "a", IfName: "eth0", Config: json.RawMessage(`{"name":"n"}`)}
	b := Request{Command: CmdDel, ContainerID: "b", IfName: "eth0", Config: json.RawMessage(`{"name":"n"}`)}
	require.NoError(t, WriteSpool(dir, a))
	require.NoError(t, WriteSpool(dir, b))
	require.NoError(t, WriteSpool(dir, a)) // the same attachment again
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{"command":"ADD","containerID":"c"}`), 0o600))
	reqs, bad, err = ReadSpool(dir)
	require.NoError(t, err)
	require.Len(t, reqs, 2)
	require.Equal(t, []string{filepath.Join(dir, "x.json")}, bad, "only DELs are spooled")
	ids := []string{reqs[0].Request.ContainerID, reqs[1].Request.ContainerID}
	require.ElementsMatch(t, []string{"a", "b"}, ids)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.Contains(e.Name(), ".tmp-"), "no temporary file left: %s", e.Name())
	}
}

type echoHandler struct{}

func (echoHandler) Handle(_ context.Context, r Request) Response {
	return Response{Result: json.RawMessage(`{"cmd":"` + r.Command + `"}`)}
}

func TestCallAndServe(t *testing.T) {
	dir, err := os.MkdirTemp("", "proto")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")

	_, err = Call(context.Background(), sock, Request{Command: CmdAdd})
	require.ErrorIs(t, err, ErrUnreachable)

	require.NoError(t, os.WriteFile(sock, nil, 0o600)) // a stale file where the socket goes
	l, err := Listen(sock)
	require.NoError(t, err)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, echoHandler{}) }()
	resp, err := Call(context.Background(), sock, Request{Command: CmdCheck})
	require.NoError(t, err)
	require.JSONEq(t, `{"cmd":"CHECK"}`, string(resp.Result))

	client := &http.Client{Transport: unixTransport(sock)}
	hresp, err := client.Post("http://x"+HTTPPath, "application/json", strings.NewReader("not json"))
	require.NoError(t, err)
	var r Response
	require.NoError(t, json.NewDecoder(hresp.Body).Decode(&r))
	hresp.Body.Close()
	require.Equal(t, ErrDecodingFailure, r.Error.Code)

	cancel()
	require.NoError(t, <-done)
	_, err = Call(context.Background(), sock, Request{Command: CmdAdd})
	require.True(t, errors.Is(err, ErrUnreachable), "after shutdown: %v", err)
}
