package sandbox_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sandboxd/sandbox"
)

// A page served in the sandbox, fetched through a forward's Unix socket and
// through a loopback TCP forward.
func TestForward(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	run(t, sb, "mkdir -p /root/www && echo hello through the forward >/root/www/index.html")
	httpd, err := sb.StartProcess(ctx, "exec httpd -f -p 8080 -h /root/www")
	if err != nil {
		t.Fatal(err)
	}
	defer httpd.Kill(ctx, "")

	unix, err := sb.Forward(ctx, 8080, "")
	if err != nil || unix.Socket == "" || unix.Address != "" || unix.Port != 8080 {
		t.Fatalf("forward: %+v %v", unix, err)
	}
	tcp, err := sb.Forward(ctx, 8080, "127.0.0.1:0")
	if err != nil || tcp.Address == "" || tcp.Socket != "" {
		t.Fatalf("tcp forward: %+v %v", tcp, err)
	}
	list, err := sb.Forwards(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("forwards: %v %v", list, err)
	}
	viaUnix := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", unix.Socket)
		}}}
	for _, c := range []struct {
		client *http.Client
		url    string
	}{{viaUnix, "http://sandbox/index.html"}, {http.DefaultClient, "http://" + tcp.Address + "/index.html"}} {
		body := ""
		for i := 0; i < 50 && !strings.Contains(body, "hello"); i++ {
			if r, err := c.client.Get(c.url); err == nil {
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				body = string(b)
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if body != "hello through the forward\n" {
			t.Fatalf("%s: %q", c.url, body)
		}
	}
	for _, f := range []*sandbox.Forward{unix, tcp} {
		if err := f.Close(ctx); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	if list, err := sb.Forwards(ctx); err != nil || len(list) != 0 {
		t.Fatalf("forwards after close: %v %v", list, err)
	}
}
