/* Shared by the exec helper's modes (sandboxd-nsexec.c, serve.c). */
#pragma once

#define NSEXEC_CHECK_LINE "sandboxd-nsexec ok\n"

void nsexec_say(const char *s); /* to stderr */
void nsexec_out(const char *s); /* to stdout */
/* A PID namespace's init: lives until rfd reads EOF; closes stdin, stdout and stderr. */
_Noreturn void nsexec_run_init(int rfd);
/* --serve DIR: see serve.c; the process's exit code. */
int nsexec_serve(const char *dir);
