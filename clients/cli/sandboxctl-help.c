/* Every command's own --help (sandboxctl.h): its usage line, what it does and its options,
 * on standard output, exit status 0, without connecting to the daemon. */
#include <stdio.h>
#include <string.h>

#include "sandboxctl.h"

struct help {
    const char *cmd;
    const char *text; /* after "Usage: sandboxctl " */
};

static const struct help helps[] = {
    {"status", "status\n\nThe daemon's version, uptime, connections, sandboxes by state, whether "
               "Proxmox is\nreachable and the warm pools (daemon.status).\n"},
    {"create", "create [OPTIONS]\n\nCreate a sandbox, wait until it is ready, print it "
               "(sandbox.create).\n\n"
               "  --internet          outbound HTTP, HTTPS and DNS on from the start\n"
               "  --allow ENTRY       an allow-list entry instead (CIDR[:PORT] or a domain name,\n"
               "                      e.g. pypi.org, *.github.com; repeat it)\n"
               "  --ttl S             the lease in seconds\n"
               "  --cores N, --memory MB, --disk GB\n"
               "  --net-rate MBIT     bandwidth cap in Mbit/s (0: none)\n"
               "  --hostname H        a DNS label\n"
               "  --auto-pause S      paused after S seconds without use (auto_pause_s)\n"
               "  --resume-on-use     a call on it while paused resumes it first\n"
               "  --label K=V         a label (up to 16)\n"
               "  --volume NAME:PATH[:ro]  your volume mounted at PATH (read-only: :ro)\n"
               "  --template NAME     one of the daemon's templates\n"
               "  --node NODE         the Proxmox node (admins)\n"},
    {"resize", "resize ID [--cores N] [--memory MB] [--disk GB] [--net-rate MBIT]\n\nChange "
               "cores, memory and the bandwidth cap (Mbit/s, 0: none) live and grow\nthe disk; "
               "at least one option (sandbox.resize).\n"},
    {"list", "list [--all]\n\nYour sandboxes; --all: every owner's (admins) (sandbox.list).\n"},
    {"show", "show ID\n\nOne sandbox (sandbox.get).\n"},
    {"exec", "exec ID [OPTIONS] -- CMD...\n\nRun CMD in the sandbox; stdin is forwarded, output "
             "streamed, and the exit status\nis the command's (124: timed out).\n\n"
             "  -t, --tty           on a terminal: the local one in raw mode, its size and\n"
             "                      resizes passed on, Ctrl-C to the remote program; the\n"
             "                      remote process ends when sandboxctl does\n"
             "  --timeout MS        kill it after MS milliseconds (default 60000 without\n"
             "                      --tty; no short form)\n"
             "  --env K=V           an environment variable\n"
             "  --cwd DIR           the working folder\n"
             "  -u, --user USER     run as this user of the sandbox (a name or a uid)\n"
             "  --max-output BYTES  keep at most BYTES of each stream; a cut is said on\n"
             "                      stderr, the exit status stays the command's (not with\n"
             "                      --tty)\n"},
    {"put", "put [-r] [-q] ID LOCAL|- REMOTE\n\nCopy a file (stdin: -) into the sandbox "
            "(file.write).\n\n"
            "  -r                  LOCAL is a folder: copy its tree; say on stderr how many\n"
            "                      files and folders and how many bytes were written\n"
            "  -q, --quiet         say nothing on success\n"},
    {"get", "get [-r] ID REMOTE [LOCAL|-]\n\nCopy a file out of the sandbox (stdout: - or no "
            "LOCAL) (file.read).\n\n"
            "  -r                  REMOTE is a folder: unpack its tree into LOCAL\n"},
    {"ls", "ls ID PATH\n\nList a folder (file.list).\n"},
    {"stat", "stat [-L] ID PATH\n\nDescribe a path; -L follows a link (file.stat).\n"},
    {"rm", "rm [-r] ID PATH\n\nRemove; -r: a folder and everything in it (file.remove).\n"},
    {"mkdir", "mkdir [-p] [-m MODE] ID PATH\n\nMake a folder; -p: parents too, no error if "
              "there (file.mkdir).\n"},
    {"mv", "mv ID FROM TO\n\nRename or move (file.rename).\n"},
    {"internet", "internet ID on|off|allow ENTRY... [--wait]\n\nSwitch outbound internet, or "
                 "allow only the entries (CIDR[:PORT] or a domain name, reached\nthrough the "
                 "daemon's egress proxy);\n--wait: until a probe confirms it "
                 "(sandbox.set_internet).\n"},
    {"renew", "renew ID TTL_S\n\nExtend the lease to TTL_S seconds from now (sandbox.renew).\n"},
    {"destroy", "destroy [--no-wait] ID\n\nStop and purge the sandbox (sandbox.destroy). "
                "--no-wait: return once\n"
                "the destroy has begun (prints \"ID destroying\").\n"},
    {"snapshot", "snapshot ID NAME\n\nSnapshot the sandbox's disk (sandbox.snapshot). NAME: a "
                 "letter, then\nletters, digits, _ or -, 2..40 characters.\n"},
    {"snapshots", "snapshots ID\n\nThe sandbox's snapshots, oldest first (sandbox.snapshots).\n"},
    {"rollback", "rollback ID NAME\n\nPut the disk back to snapshot NAME; the sandbox restarts "
                 "and is ready\nagain, its processes of before gone (sandbox.rollback).\n"},
    {"snapshot-delete", "snapshot-delete ID NAME\n\nDelete snapshot NAME "
                        "(sandbox.snapshot_delete).\n"},
    {"fork", "fork ID [--count N] [--snapshot NAME] [--ttl S]\n\nMake N (1..32, default 1) new "
             "sandboxes with the disk of sandbox ID as of snapshot NAME, or as of now (a snapshot "
             "taken for the fork and deleted afterwards); ID keeps running (sandbox.fork). Each "
             "child gets its own host key, address and lease (S seconds; default: ID's lease "
             "length) and ID's labels. Prints one line per child: ID STATE IP. Exits 2 when some "
             "children failed.\n"},
    {"template", "template list | create ID NAME | delete NAME | publish NAME |\n"
                 "         build NAME -f FILE [--context DIR] [--internet]\n\n"
                 "list: the templates you may use (template.list): NAME NODE VMID ORIGIN OWNER\n"
                 "SANDBOXES+POOL. create: the sandbox becomes template NAME; it stops and ends\n"
                 "(template.create). delete: a template made from a sandbox, unused "
                 "(template.delete).\npublish: every uid may use it; admins only "
                 "(template.publish).\nbuild: a template from FILE (FROM, RUN, COPY, ENV, "
                 "WORKDIR, USER; a Dockerfile\nsubset) run in a new sandbox, each step's output "
                 "after its \"Step N/M\" line;\nENV, WORKDIR and USER become the template's "
                 "defaults; a failing step or Ctrl-C\nleaves nothing. --context DIR: where COPY "
                 "reads (default: FILE's folder);\n--internet: the build sandbox's internet.\n"},
    {"volume", "volume create NAME SIZE_GB | list | delete NAME\n\n"
               "create: a volume of SIZE_GB GiB, storage that outlives sandboxes "
               "(volume.create).\nlist: your volumes (admins: all): NAME SIZE_GB OWNER "
               "ATTACHED_TO (volume.list).\ndelete: a volume and its data (volume.delete).\n"},
    {"attach", "attach ID NAME:PATH[:ro]\n\nMount your volume NAME at PATH in a running sandbox "
               "(sandbox.attach),\nread-only with :ro; the sandbox keeps running (it restarts "
               "when the mount\ncould not be hot-plugged). Prints the sandbox.\n"},
    {"detach", "detach ID NAME\n\nTake volume NAME out of the sandbox back to the daemon "
               "(sandbox.detach). The\nsandbox restarts: its processes and forwards end. Prints "
               "the sandbox, ready.\n"},
    {"pause", "pause ID\n\nStop the sandbox's container and keep its disk (sandbox.pause); its "
              "processes\nand forwards end. Prints the sandbox, paused.\n"},
    {"resume", "resume ID\n\nStart a paused sandbox again (sandbox.resume): same disk, address "
               "and host key.\nPrints the sandbox, ready.\n"},
    {"ps", "ps ID\n\nThe sandbox's background processes (process.list).\n"},
    {"start", "start ID [OPTIONS] -- CMD...\n\nStart CMD as a background process and print "
              "its id (process.start).\n\n"
              "  --stdin             give it a stdin that `call process.write` feeds\n"
              "  -t, --pty           run it on a terminal of the local window's size\n"
              "  -a, --attach        attach stdin, stdout and stderr, wait, exit with its\n"
              "                      status; with --pty as exec --tty does\n"
              "  --env K=V           an environment variable\n"
              "  --cwd DIR           the working folder\n"
              "  -u, --user USER     run as this user of the sandbox (a name or a uid)\n"},
    {"logs", "logs [-f] [--stderr] ID PROC\n\nA process's output (process.read).\n\n"
             "  -f, --follow        follow until it ends, then exit with its status\n"
             "  --stderr            its standard error\n"},
    {"kill", "kill ID PROC [SIGNAL]\n\nSignal a process and its tree (default SIGKILL) "
             "(process.kill).\n"},
    {"call", "call METHOD [JSON]\n\nA raw request; prints the raw result.\n"},
    {"metrics", "metrics\n\nThe daemon's metrics, Prometheus text format (admins) "
                "(daemon.metrics).\n"},
    {"events", "events\n\nPrint lifecycle events as they happen (daemon.subscribe).\n"},
};

bool ctl_help_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0)
            return true;
    return false;
}

int ctl_help(const char *cmd)
{
    for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++)
        if (strcmp(helps[i].cmd, cmd) == 0) {
            printf("Usage: sandboxctl %s", helps[i].text);
            return 0;
        }
    return -1;
}
