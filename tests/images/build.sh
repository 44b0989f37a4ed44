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
#   CACHE/agents-claude, CACHE/agents-codex
#                   OCI layouts, tag "latest", for the real coding agents'
#                   end-to-end tests (tests/integration/test_agents.py): two
#                   layers, a Debian 13 (trixie) minbase with Node.js, git,
#                   python3, procps, curl (shared), and one agent installed
#                   from the npm registry at the version AGENT_PACKAGES pins
#                   (host npm into a staging prefix; the only place the
#                   versions are written). Needs deb.debian.org and the npm
#                   registry once; about 2-3 minutes.
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
# The coding agents of the end-to-end suite, pinned (docs/testing.md "Real
# coding agents": how to move a pin). One image per agent: each Domain
# unpacks only its own agent (a few hundred MB each).
#   claude: Claude Code's last release whose engines.node accepts the
#           Node.js 20 of trixie (2.1.198 and later need 22); a native binary
#   codex:  Codex CLI, its node launcher and its linux-x64 binary package
AGENT_PACKAGES_claude="@anthropic-ai/claude-code@2.1.197"
AGENT_PACKAGES_codex="@openai/codex@0.171.0"
AGENTS_SUITE="trixie"
AGENTS_DEBS="git,ca-certificates,python3,procps,nodejs,curl,less"
RECIPE_AGENTS="agents recipe 1: $AGENTS_SUITE $AGENTS_DEBS $AGENT_PACKAGES_claude $AGENT_PACKAGES_codex"

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

# ---- the coding agents' images ----------------------------------------------

# stage_agent NAME DIR: the agent's files under DIR (a tree rooted like the
# image's /), installed by the host's npm (the registry's tarballs, their
# integrity checked by npm) with install scripts off: nothing of the package
# runs on the host. What a postinstall would do is done here.
stage_agent() {
    name=$1 d=$2
    command -v npm >/dev/null 2>&1 || die "npm is missing: apt-get install npm"
    pkgs=""
    eval "pkgs=\$AGENT_PACKAGES_$name"
    lib=$d/usr/local/lib
    mkdir -p "$lib" "$d/usr/local/bin"
    say "npm install $pkgs"
    # shellcheck disable=SC2086  # pkgs is a list of package@version words
    if ! npm install --prefix "$lib" --no-save --no-audit --no-fund --ignore-scripts \
        --os=linux --cpu=x64 $pkgs >"$WORK/npm-$name.log" 2>&1; then
        tail -n 20 "$WORK/npm-$name.log" >&2
        die "npm install $pkgs failed (log above); is the npm registry reachable?"
    fi
    rm -f "$lib/package.json" "$lib/package-lock.json" "$lib/node_modules/.package-lock.json"
    m=$lib/node_modules
    case $name in
    claude)
        # install.cjs would copy the native binary over the bin/claude.exe
        # placeholder; a link does the same without running it.
        native=$m/@anthropic-ai/claude-code-linux-x64/claude
        [ -x "$native" ] || die "$pkgs has no linux-x64 binary ($native)"
        ln -s ../lib/node_modules/@anthropic-ai/claude-code-linux-x64/claude \
            "$d/usr/local/bin/claude"
        ;;
    codex)
        vendor=$m/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl
        [ -x "$vendor/bin/codex" ] || die "$pkgs has no linux-x64 binary ($vendor/bin/codex)"
        # Speech input: 40 MB of GStreamer the tests never use.
        rm -rf "$vendor/codex-resources/voice"
        ln -s ../lib/node_modules/@openai/codex/bin/codex.js "$d/usr/local/bin/codex"
        ;;
    esac
}

# build_agent_images: CACHE/agents-NAME for every NAME in AGENT_NAMES, each
# the shared trixie layer plus the agent's own.
AGENT_NAMES="claude codex"
build_agent_images() {
    todo=""
    for n in $AGENT_NAMES; do
        if ! [ -f "$CACHE/agents-$n/.complete" ] ||
            [ "$(cat "$CACHE/agents-$n/.complete")" != "$RECIPE_AGENTS" ]; then
            todo="$todo $n"
        fi
    done
    [ -n "$todo" ] || return 0
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing: apt-get install debootstrap"
    start=$(date +%s)
    WORK=$(mktemp -d "$CACHE/.build-agents.XXXXXX")
    chmod 0700 "$WORK"
    r=$WORK/rootfs
    mkdir "$r"
    chmod 0755 "$r"
    say "debootstrap $AGENTS_SUITE minbase from $MIRROR for the agents (about 1-2 minutes)"
    if ! debootstrap --variant=minbase --include="$AGENTS_DEBS" "$AGENTS_SUITE" "$r" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1; then
        tail -n 20 "$WORK/debootstrap.log" >&2
        die "debootstrap $AGENTS_SUITE failed (log above); is $MIRROR reachable?"
    fi
    unmount_under "$r"
    find "$r/dev" -mindepth 1 -delete
    rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/lib/apt/lists/"* "$r/debootstrap"
    printf 'lazaret-agents\n' >"$r/etc/hostname"
    node_major=$(chroot "$r" node --version | sed 's/^v\([0-9]*\).*/\1/')
    [ "$node_major" -ge 20 ] || die "$AGENTS_SUITE's Node.js is $node_major: the agents need >= 20"
    tar --numeric-owner --xattrs --sort=name -C "$r" -cf "$WORK/base.tar" .
    rm -rf --one-file-system "$r"
    for n in $todo; do
        s=$WORK/stage-$n
        mkdir -m 0755 "$s"
        stage_agent "$n" "$s"
        tar --numeric-owner --owner=0 --group=0 --sort=name -C "$s" -cf "$WORK/$n.tar" .
        rm -rf "$s"
        layout=$WORK/layout-$n
        umoci init --layout "$layout"
        umoci new --image "$layout:latest"
        umoci raw add-layer --image "$layout:latest" "$WORK/base.tar"
        umoci raw add-layer --image "$layout:latest" "$WORK/$n.tar"
        umoci config --image "$layout:latest" --config.env "PATH=$IMAGE_PATH" \
            --config.cmd /bin/bash --config.workingdir / \
            --config.label "org.lazaret.test-image=agents-$n"
        umoci gc --layout "$layout"
        rm -f "$WORK/$n.tar"
        chmod -R u+rwX,go+rX,go-w "$layout"
        printf '%s\n' "$RECIPE_AGENTS" >"$layout/.complete"
        chmod 0644 "$layout/.complete"
        rm -rf --one-file-system "${CACHE:?}/agents-${n:?}"
        mv "$layout" "$CACHE/agents-$n"
        say "built $CACHE/agents-$n:latest"
    done
    rm -rf --one-file-system "$WORK"
    WORK=""
    say "agents' images built in $(($(date +%s) - start)) s"
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
build_agent_images
