#!/bin/sh
# Installs the example configuration as DIR/NAME unless a file of that name is
# already there: an administrator's configuration is never overwritten.
# Honours DESTDIR like the rest of "meson install".
#
# usage: install-config.sh SOURCE DIR NAME
set -eu
src=$1
dir=${DESTDIR:-}$2
name=$3

if [ -e "$dir/$name" ] || [ -L "$dir/$name" ]; then
    echo "Keeping existing $dir/$name (example not installed)"
    exit 0
fi
install -d -m 0755 "$dir"
install -m 0644 "$src" "$dir/$name"
echo "Installing $src to $dir/$name"
