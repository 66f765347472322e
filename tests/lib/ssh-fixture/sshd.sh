#!/bin/sh
# A throwaway OpenSSH server on 127.0.0.1 for the lib/ SSH tests (runs as root).
#   sshd.sh start DIR PORT   create keys and config in DIR (once), start sshd, wait for it
#   sshd.sh stop DIR         kill sshd and every per-connection child (session loss)
# Files in DIR: host_ed25519(.pub), client_ed25519(.pub), authorized_keys, sshd_config,
# sshd.pid, sshd.log.
set -eu

cmd=${1:?usage: sshd.sh start DIR PORT | stop DIR}
dir=${2:?missing DIR}

stop() {
    [ -f "$dir/sshd.pid" ] || return 0
    pid=$(cat "$dir/sshd.pid")
    rm -f "$dir/sshd.pid"
    # Per-connection processes are children of the listener; kill them too so every
    # client session drops at once.
    pkill -KILL -P "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
        sleep 0.05
        i=$((i + 1))
    done
}

case "$cmd" in
start)
    port=${3:?missing PORT}
    mkdir -p "$dir" /run/sshd
    chmod 0755 /run/sshd
    [ -f "$dir/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C sandboxd-test-host -f "$dir/host_ed25519"
    [ -f "$dir/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C sandboxd-test-client -f "$dir/client_ed25519"
    cp "$dir/client_ed25519.pub" "$dir/authorized_keys"
    cat >"$dir/sshd_config" <<EOF
ListenAddress 127.0.0.1:$port
HostKey $dir/host_ed25519
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
Subsystem sftp internal-sftp
LogLevel ERROR
EOF
    stop
    # Commands must run under a plain POSIX shell, as in the containers: the host's root
    # may have bash with a heavy ~/.bashrc (bash sources it for sshd). In a private mount
    # namespace, sshd sees a passwd whose root shell is /bin/sh, and a home of its own over
    # /root (what the tests leave there, such as the exec helper, goes with DIR); the host is
    # untouched.
    sed 's#^\(root:[^:]*:[^:]*:[^:]*:[^:]*:[^:]*:\).*#\1/bin/sh#' /etc/passwd >"$dir/passwd"
    mkdir -p "$dir/home"
    chmod 0700 "$dir/home"
    if ! unshare --mount --propagation private sh -c \
        "mount --bind '$dir/passwd' /etc/passwd && mount --bind '$dir/home' /root && exec /usr/sbin/sshd -f '$dir/sshd_config' -E '$dir/sshd.log'"; then
        /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
    fi
    # sshd daemonises after binding: the pid file appears once it listens.
    i=0
    while [ ! -s "$dir/sshd.pid" ] && [ $i -lt 100 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    [ -s "$dir/sshd.pid" ] || { cat "$dir/sshd.log" >&2; exit 1; }
    ;;
stop)
    stop
    ;;
*)
    echo "usage: sshd.sh start DIR PORT | stop DIR" >&2
    exit 2
    ;;
esac
