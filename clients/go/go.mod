module sandboxd/sandbox

go 1.19
