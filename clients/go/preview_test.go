package sandbox_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"testing"
	"time"

	"sandboxd/sandbox"
)

// A page served in the sandbox, fetched by net/http through a preview URL: the
// token's redirect sets the cookie the jar sends with the next request.
func TestPreview(t *testing.T) {
	m := manager(t)
	sb := create(t, m)
	ctx := context.Background()
	run(t, sb, "mkdir -p /root/www && echo hello through the preview >/root/www/index.html")
	httpd, err := sb.StartProcess(ctx, "exec httpd -f -p 8080 -h /root/www")
	if err != nil {
		t.Fatal(err)
	}
	defer httpd.Kill(ctx, "")

	p, err := sb.Preview(ctx, 8080, 300)
	if err != nil || p.Port != 8080 || p.URL == "" || p.ExpiresAt <= time.Now().Unix() {
		t.Fatalf("preview: %+v %v", p, err)
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	// the preview's host name resolves nowhere here: every connection goes to the listener
	listener := "127.0.0.1:" + u.Port()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Timeout: 10 * time.Second, Jar: jar, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", listener)
		}}}
	body := ""
	for i := 0; i < 50 && body != "hello through the preview\n"; i++ {
		if r, err := client.Get(p.URL); err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			body = string(b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if body != "hello through the preview\n" {
		t.Fatalf("%s: %q", p.URL, body)
	}
	list, err := sb.Previews(ctx)
	if err != nil || len(list) != 1 || list[0]["preview"] != p.ID {
		t.Fatalf("previews: %v %v", list, err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := client.Get(u.Scheme + "://" + u.Host + "/index.html")
	if err != nil || r.StatusCode != http.StatusForbidden {
		t.Fatalf("after Close: %v %v", r, err)
	}
	r.Body.Close()
	var _ *sandbox.Preview = p
}
