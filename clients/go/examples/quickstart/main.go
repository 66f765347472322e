// Quickstart is the program sandboxd's Go client was made for, pointed at the
// daemon: it creates a sandbox with internet access, installs nginx, writes a
// page and reads the nginx configuration back, then destroys the sandbox.
//
//	SANDBOXD_SOCKET=/run/sandboxd.sock go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"os"

	"sandboxd/sandbox"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg := sandbox.Config{Socket: os.Getenv("SANDBOXD_SOCKET")}

	mgr, err := sandbox.NewManager(cfg)
	if err != nil {
		return err
	}
	sb, err := mgr.Create(ctx, sandbox.WithHostname("user-abc"), sandbox.WithInternet(true))
	if err != nil {
		return err
	}
	defer sb.Destroy(ctx)
	fmt.Printf("sandbox %s at %s\n", sb.ID(), sb.IP())

	res, err := sb.Exec(ctx, "apt-get update && apt-get install -y nginx")
	if err != nil {
		return err
	}
	fmt.Printf("exit %d: %s\n", res.ExitCode, res.Output)

	if err := sb.WriteFile(ctx, "/var/www/html/index.html", "<h1>Hello</h1>"); err != nil {
		return err
	}
	content, err := sb.ReadFile(ctx, "/etc/nginx/nginx.conf")
	if err != nil {
		// No nginx in this sandbox's image (apt-get failed above): say so and go on.
		fmt.Printf("nginx.conf: %v\n", err)
		content, err = sb.ReadFile(ctx, "/var/www/html/index.html")
		if err != nil {
			return err
		}
	}
	fmt.Printf("read %d bytes: %s\n", len(content), content)
	return nil
}
