#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Build the offline OCI test images (docs/testing.md): no registry is
# contacted to *use* them; tests refer to them with oci: transport references.
#
#   tests/images/build.sh [CACHE]       (as root; CACHE default below)
#
#   CACHE/busybox   OCI layout, tag "latest": busybox-static with its applet
#                   links, /etc/passwd, /tmp, /root, /usr/local/bin, and the
#                   host's git with every library ldd lists. Seconds to build.
#   CACHE/agent     OCI layout, tag "latest": the busybox image with a
#                   non-root user "agent" (uid 1000, gid 1000, home
#                   /home/agent, also in group "crew" 1500) as its User,
#                   for the keep-id tests (docs/runtime.md "The agent's user").
#   CACHE/debian    OCI layout, tag "bookworm": debootstrap --variant=minbase
#                   --include=git,ca-certificates,python3 bookworm (needs the Debian
#                   mirror, $LAZARET_DEBIAN_MIRROR, default deb.debian.org;
#                   about 1-2 minutes). Only the layout is kept.
#
# A layout is complete when CACHE/NAME/.complete exists and names the current
# recipe (RECIPE_* below: bump one when you change what goes into its image);
# complete layouts are never rebuilt (delete the directory to force it). Each one is built in a
# temporary directory under CACHE and renamed into place at the end, so a
# reader never sees half an image. Concurrent runs serialise on CACHE/.lock.
# Everything is world-readable (directories 0755): the unprivileged test user
# reads the layouts.
set -eu

CACHE=${1:-/var/cache/lazaret-test-images}
MIRROR=${LAZARET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RECIPE_BUSYBOX="busybox recipe 2"
RECIPE_DEBIAN="debian recipe 2"
RECIPE_AGENT="agent recipe 1"

# The applets the tests (and a human poking around) use.
APPLETS="sh ls cat cp mkdir touch id sleep echo env grep stat wc rm mv test true false
head tail sed kill ps hostname pwd chmod ln readlink dd seq tty stty find xargs sort
uniq date uname which [ printf cut tr basename dirname du df mount tee awk"

say() {
    printf 'images: %s\n' "$*" >&2
}

die() {
    printf 'images: error: %s\n' "$*" >&2
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    die "run as root (debootstrap and root-owned image files need it)"
fi
for tool in umoci tar flock; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "$tool is missing: install it (scripts/install-deps.sh)"
done

umask 022
mkdir -p "$CACHE"
chmod 0755 "$CACHE"
CACHE=$(cd "$CACHE" && pwd -P)

exec 9>"$CACHE/.lock"
flock 9

WORK=""
cleanup() {
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        unmount_under "$WORK" || true
        rm -rf --one-file-system "$WORK"
    fi
}

# debootstrap mounts /proc and /sys in the target; an interrupted run can
# leave them behind. Deepest first.
unmount_under() {
    awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m" || true; done
}

trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Leftovers of an interrupted run (we hold the lock: nobody else is building).
for stale in "$CACHE"/.build-*; do
    [ -e "$stale" ] || continue
    unmount_under "$stale" 2>/dev/null || true
    rm -rf --one-file-system "$stale"
done

# ---- busybox + git ---------------------------------------------------------

copy_with_parents() {
    # copy_with_parents HOSTFILE ROOTFS: same absolute path inside ROOTFS,
    # symlinks followed (the image gets real files).
    dest=$2$1
    mkdir -p "$(dirname "$dest")"
    cp -L "$1" "$dest"
}

populate_busybox() {
    r=$1
    bb=$(command -v busybox) || die "busybox is missing: apt-get install busybox-static"
    if ldd "$bb" >/dev/null 2>&1; then
        die "$bb is dynamically linked: install busybox-static"
    fi
    mkdir -p "$r/bin" "$r/sbin" "$r/etc" "$r/root" "$r/tmp" "$r/usr/bin" "$r/usr/sbin" \
        "$r/usr/local/bin" "$r/usr/local/sbin" "$r/opt" "$r/var/tmp" "$r/proc" "$r/sys" \
        "$r/dev" "$r/run" "$r/home"
    chmod 1777 "$r/tmp" "$r/var/tmp"
    chmod 0700 "$r/root"
    cp -L "$bb" "$r/bin/busybox"
    chmod 0755 "$r/bin/busybox"
    have=$("$bb" --list)
    for a in $APPLETS; do
        printf '%s\n' "$have" | grep -qxF -- "$a" || die "busybox has no applet '$a'"
        ln -s busybox "$r/bin/$a"
    done
    ln -s ../../bin/busybox "$r/usr/bin/env"

    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
        >"$r/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
    printf 'lazaret-test\n' >"$r/etc/hostname"

    # git and the libraries it links (ld.so included).
    git=$(command -v git) || die "git is missing: apt-get install git"
    copy_with_parents "$git" "$r"
    ldd "$git" | awk '
        $2 == "=>" && $3 ~ /^\// { print $3 }
        $1 ~ /^\// { print $1 }' | sort -u | while read -r lib; do
        copy_with_parents "$lib" "$r"
    done
    # /usr/lib/git-core (git's separate helper programs) stays out: init,
    # status, add, commit and log are builtins, and the image stays tiny.
    # An empty template directory keeps `git init` from warning.
    mkdir -p "$r/usr/share/git-core/templates"
}

populate_agent() {
    r=$1
    populate_busybox "$r"
    printf 'agent:x:1000:1000:agent:/home/agent:/bin/sh\n' >>"$r/etc/passwd"
    printf 'agent:x:1000:\ncrew:x:1500:agent\n' >>"$r/etc/group"
    mkdir -p "$r/home/agent"
    chown 1000:1000 "$r/home/agent"
    chmod 0755 "$r/home/agent"
}

# ---- Debian 12 minbase -------------------------------------------------------

populate_debian() {
    r=$1
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing: apt-get install debootstrap"
    say "debootstrap bookworm minbase from $MIRROR (about 1-2 minutes)"
    if ! debootstrap --variant=minbase --include=git,ca-certificates,python3 bookworm "$r" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1; then
        tail -n 20 "$WORK/debootstrap.log" >&2
        die "debootstrap failed (log above); is $MIRROR reachable?"
    fi
    unmount_under "$r"
    # Device nodes cannot be unpacked rootless and the runtime provides /dev;
    # downloaded packages and indexes are dead weight.
    find "$r/dev" -mindepth 1 -delete
    rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/lib/apt/lists/"* "$r/debootstrap"
    printf 'lazaret-test\n' >"$r/etc/hostname"
}

# ---- layout ------------------------------------------------------------------

# build_image NAME TAG RECIPE POPULATE_FUNCTION [USER]
build_image() {
    name=$1 tag=$2 recipe=$3 populate=$4 user=${5:-}
    if [ -f "$CACHE/$name/.complete" ] &&
        [ "$(cat "$CACHE/$name/.complete")" = "$recipe" ]; then
        return 0
    fi
    start=$(date +%s)
    WORK=$(mktemp -d "$CACHE/.build-$name.XXXXXX")
    chmod 0700 "$WORK"
    mkdir "$WORK/rootfs"
    chmod 0755 "$WORK/rootfs"
    "$populate" "$WORK/rootfs"

    # Numeric ids as they are (debootstrap's _apt files keep theirs).
    tar --numeric-owner --xattrs --sort=name -C "$WORK/rootfs" -cf "$WORK/layer.tar" .
    rm -rf --one-file-system "$WORK/rootfs"

    layout=$WORK/layout
    umoci init --layout "$layout"
    umoci new --image "$layout:$tag"
    umoci raw add-layer --image "$layout:$tag" "$WORK/layer.tar"
    umoci config --image "$layout:$tag" --config.env "PATH=$IMAGE_PATH" \
        --config.cmd /bin/sh --config.workingdir / \
        --config.label "org.lazaret.test-image=$name"
    if [ -n "$user" ]; then
        umoci config --image "$layout:$tag" --config.user "$user"
    fi
    umoci gc --layout "$layout"
    rm -f "$WORK/layer.tar"

    chmod -R u+rwX,go+rX,go-w "$layout"
    printf '%s\n' "$recipe" >"$layout/.complete"
    chmod 0644 "$layout/.complete"
    rm -rf --one-file-system "${CACHE:?}/${name:?}"
    mv "$layout" "$CACHE/$name"
    rm -rf --one-file-system "$WORK"
    WORK=""
    say "built $CACHE/$name:$tag in $(($(date +%s) - start)) s"
}

build_image busybox latest "$RECIPE_BUSYBOX" populate_busybox
build_image agent latest "$RECIPE_AGENT" populate_agent agent
build_image debian bookworm "$RECIPE_DEBIAN" populate_debian
