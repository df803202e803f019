#!/bin/sh
# Run in an image's first stage: puts BINARY (stripped) in ROOTFS/usr/local/bin and, at their
# paths, exactly the shared libraries it loads that the slim base (mounted at SLIM) lacks.
# The final stage copies ROOTFS over the slim base. Fails, naming the library, when one of
# BINARY's libraries does not resolve here.
#   gather-runtime.sh BINARY ROOTFS SLIM
set -eu
binary="$1" rootfs="$2" slim="$3"
[ -x "$binary" ] || { echo "gather-runtime: $binary is not an executable" >&2; exit 1; }

missing="$(ldd "$binary" | awk '/not found/ {print $1}')"
if [ -n "$missing" ]; then
  echo "gather-runtime: $(basename "$binary") needs libraries this stage lacks: $missing" >&2
  exit 1
fi

mkdir -p "$rootfs/usr/local/bin"
strip --strip-unneeded -o "$rootfs/usr/local/bin/$(basename "$binary")" "$binary"

# ldd's "name => /path (address)" lines: each library's content (not the link) is copied to
# where the loader found it, under the name it asked for (the binary's RUNPATH still applies).
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
  in_slim=false
  for dir in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu; do
    [ -e "$slim$dir/$name" ] && in_slim=true
  done
  $in_slim && continue
  real="$(readlink -f "$path")"
  dest="$rootfs$(dirname "$path")/$name"
  mkdir -p "$(dirname "$dest")"
  cp "$real" "$dest"
  echo "gather-runtime: $name ($(du -k "$dest" | cut -f1) KiB) from $real"
done
