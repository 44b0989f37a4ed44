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

if [ -z "$missing" ]; then
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
