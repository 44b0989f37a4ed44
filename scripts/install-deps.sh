#!/bin/sh
# Install the Debian 12 packages Lazaret needs to build, run and test.
# Idempotent: only missing packages are installed; uses sudo when not root.
set -eu

PACKAGES="
build-essential clang libclang-rt-14-dev meson ninja-build pkg-config
libtomlplusplus-dev libjansson-dev libssl-dev libsqlite3-dev libmnl-dev
libseccomp-dev libcap-dev libcmocka-dev libsubid-dev libvterm-dev
runsc slirp4netns uidmap nftables iproute2 skopeo umoci busybox-static debootstrap docker-registry
git python3 python3-pytest python3-pexpect python3-cryptography python3-yaml python3-jsonschema
python3-kubernetes tmux passwd util-linux procps gh
groff-base bash-completion zsh cppcheck clang-format-14
"

# npm (the agent tests' image build installs the agents with it): Debian's
# package only when no npm is there. A Node.js from elsewhere (NodeSource's
# nodejs, as on these machines) brings its own npm and conflicts with
# Debian's npm package.
if ! command -v npm >/dev/null 2>&1; then
    PACKAGES="$PACKAGES npm"
fi

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

# runsc 0.0~20240729.0 beside the system's (docs/runtime.md "Which runsc"):
# the release Debian 13 and bookworm-backports ship, which the tests run a
# subset on (docs/testing.md "Both runsc releases"). bookworm-backports'
# build (Go 1.22 from backports, for Debian 12; a static binary) is fetched
# with apt-get download from a temporary sources list: apt checks the
# Release file's signature against the Debian archive keyring and the
# package against the SHA256 the signed index gives, so only
# deb.debian.org is asked and nothing of the system's apt state changes.
# The SHA256 is also pinned here, so a different build is never installed
# under this name. Unpacked (dpkg-deb -x) into its own directory;
# /usr/bin/runsc stays the system's. Fast when already there.
RUNSC_NEW_VERSION="0.0~20240729.0-4~bpo12+2"
RUNSC_NEW_SHA256="afdde883e3876ea807e19c708d4432674a20cb10186a7a5b554d62f38ea8de46"
RUNSC_NEW_DIR="/opt/lazaret/runsc-20240729"
install_new_runsc() {
    if [ -x "$RUNSC_NEW_DIR/runsc" ] && [ -f "$RUNSC_NEW_DIR/.deb-sha256" ] &&
        [ "$(cat "$RUNSC_NEW_DIR/.deb-sha256")" = "$RUNSC_NEW_SHA256" ]; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: $RUNSC_NEW_DIR/runsc is missing" >&2
        echo "  fix: run scripts/install-deps.sh as root (sudo scripts/install-deps.sh)" >&2
        return 1
    fi
    echo "install-deps: installing runsc $RUNSC_NEW_VERSION into $RUNSC_NEW_DIR"
    work=$(mktemp -d)
    # apt's download sandbox user must be able to write here.
    chmod 0755 "$work"
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/deb"
    chown _apt "$work/deb" 2>/dev/null || true
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main" \
        > "$work/sources.list"
    set -- -o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" -qq
    if ! apt-get "$@" update ||
        ! (cd "$work/deb" && apt-get "$@" download "runsc=$RUNSC_NEW_VERSION"); then
        rm -rf "$work"
        echo "install-deps: cannot download runsc $RUNSC_NEW_VERSION from deb.debian.org" >&2
        return 1
    fi
    deb=$(ls "$work"/deb/runsc_*.deb)
    sum=$(sha256sum "$deb" | cut -d' ' -f1)
    if [ "$sum" != "$RUNSC_NEW_SHA256" ]; then
        rm -rf "$work"
        echo "install-deps: runsc $RUNSC_NEW_VERSION has SHA256 $sum, expected $RUNSC_NEW_SHA256" >&2
        return 1
    fi
    dpkg-deb -x "$deb" "$work/x"
    mkdir -p "$RUNSC_NEW_DIR"
    chmod 0755 /opt/lazaret "$RUNSC_NEW_DIR"
    install -o root -g root -m 0755 "$work/x/usr/bin/runsc" "$RUNSC_NEW_DIR/runsc.new"
    mv -f "$RUNSC_NEW_DIR/runsc.new" "$RUNSC_NEW_DIR/runsc"
    echo "$RUNSC_NEW_SHA256" > "$RUNSC_NEW_DIR/.deb-sha256"
    rm -rf "$work"
}

if [ -z "$missing" ]; then
    install_new_runsc
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps: these Debian packages are missing:$missing" >&2
    echo "  fix: install them as root: apt-get install$missing" >&2
    exit 1
fi

echo "install-deps: installing:$missing"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null

# docker-registry is for the tests only (tests/integration/test_images.py
# starts its own on 127.0.0.1); the package's service would listen on
# every address, port 5000: not on a machine this script set up.
case " $missing " in
*" docker-registry "*)
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
    fi
    ;;
esac

install_new_runsc
