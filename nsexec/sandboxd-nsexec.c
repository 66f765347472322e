/* sandboxd-nsexec: runs one command of sandbox.exec in a PID namespace of its own, inside a
 * sandbox. The daemon copies it into the container once (named by its content hash, see
 * lib/ssh/sshexec.c) and the login shell of each exec execs it in place:
 *
 *   sandboxd-nsexec -- COMMAND [ARG...]    run COMMAND (looked up in PATH) as below
 *   sandboxd-nsexec --check                print "sandboxd-nsexec ok" (it can run here)
 *   sandboxd-nsexec --serve DIR            the same, and make sure the exec supervisor
 *                                          runs (serve.c)
 *
 * It makes a PID namespace and forks its init, then (where allowed) a mount namespace with
 * the namespace's own /proc, as `unshare -p -f -m --mount-proc` does, and forks the command:
 *
 *   sandboxd-nsexec (the exec's process, in the container's namespace)
 *     ├─ init (pid 1)    ignores SIGCHLD (the kernel reaps the orphans it inherits) and
 *     │                  reads a pipe until EOF, which comes when this process ends; in the
 *     │                  container's mount namespace
 *     └─ COMMAND         pid 2: mounts /proc (own mount namespace only), then execs
 *
 * and waits for COMMAND: it ends as COMMAND ended (the same exit code, or the same signal),
 * which is what sshd reports. Its end closes the pipe, init exits and the kernel kills
 * everything left in the namespace: what the command started ends with it, also when this
 * process is killed. A stopped COMMAND stops this process too (and is continued with it).
 * Where no PID namespace can be made (not permitted), COMMAND runs in place, as without the
 * helper. No allocation, no stdio: a small static binary for any userland. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nsexec.h"

#define say nsexec_say

void nsexec_say(const char *s)
{
    (void)!write(STDERR_FILENO, s, strlen(s));
}

void nsexec_out(const char *s)
{
    (void)!write(STDOUT_FILENO, s, strlen(s));
}

/* pid 1: lives as long as the pipe's write end is open in the parent. */
_Noreturn void nsexec_run_init(int rfd)
{
    char c;

    /* Not the channel's descriptors: sshd ends the channel when the helper and the command
     * (and what they left) have closed them, without waiting for init. */
    close(STDIN_FILENO);
    close(STDOUT_FILENO);
    close(STDERR_FILENO);
    signal(SIGCHLD, SIG_IGN);
    while (read(rfd, &c, 1) != 0 && (errno == EINTR || errno == EAGAIN))
        ;
    _exit(0);
}

/* pid 2: the command. */
static _Noreturn void run_command(char **argv, int own_proc)
{
    if (own_proc && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        say("sandboxd-nsexec: cannot mount /proc\n");
    execvp(argv[0], argv);
    say("sandboxd-nsexec: cannot run the command: ");
    say(strerror(errno));
    say("\n");
    _exit(errno == ENOENT ? 127 : 126);
}

/* Ends as the child ended: its exit code, or its signal. */
static _Noreturn void end_like(int status)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit no_core = {0, 0};

        (void)setrlimit(RLIMIT_CORE, &no_core);
        signal(sig, SIG_DFL);
        kill(getpid(), sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

int main(int argc, char **argv)
{
    int p[2], own_proc = 0, status;
    pid_t init, child;

    if (argc == 2 && !strcmp(argv[1], "--check")) {
        nsexec_out(NSEXEC_CHECK_LINE);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--serve"))
        return nsexec_serve(argv[2]);
    if (argc < 3 || strcmp(argv[1], "--")) {
        say("usage: sandboxd-nsexec -- COMMAND [ARG...] | --check | --serve DIR\n");
        return 125;
    }
    argv += 2;
    if (unshare(CLONE_NEWPID) < 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    if (pipe2(p, O_CLOEXEC) < 0)
        return 126;
    /* init stays in the container's mount namespace, as the shell wrapper's does (so
     * `nsenter -m -t 1` from the command reaches the container's /proc). */
    init = fork();
    if (init < 0)
        return 126;
    if (init == 0) {
        close(p[1]);
        nsexec_run_init(p[0]);
    }
    /* Only a private tree gets the namespace's /proc: never into the container's. */
    if (unshare(CLONE_NEWNS) == 0)
        own_proc = mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
    close(p[0]);
    child = fork();
    if (child < 0)
        return 126;
    if (child == 0)
        run_command(argv, own_proc);
    for (;;) {
        pid_t r = waitpid(child, &status, WUNTRACED);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return 126;
        if (!WIFSTOPPED(status))
            break;
        kill(getpid(), SIGSTOP);
        kill(child, SIGCONT);
    }
    close(p[1]);
    end_like(status);
}
