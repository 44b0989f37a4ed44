#!/bin/sh
# make demo: install what is missing, build, and show Lazaret's main job on a
# demo workspace, as an unprivileged user (Lazaret refuses root).
#
#   1. scripts/install-deps.sh, scripts/build.sh release build
#   2. as root: create the user lazaret-demo (with subordinate ids), install
#      the binary into its ~/.local/bin and continue as that user; as any
#      other user: continue as yourself with build/src/cli/lazaret
#   3. write the demo configuration to ~/.config/lazaret/config.toml (0600;
#      an existing different file is left alone and demo.toml is used instead)
#   4. create the git workspace ~/lazaret-demo-workspace
#   5. make sure XDG_RUNTIME_DIR is a private directory
#   6. lazaret doctor (informational: its failures do not stop the demo)
#   7. lazaret config check default --workspace ~/lazaret-demo-workspace
#   8. lazaret run default -- <a short tour>: a command in the sandbox, with
#      an auto-approved host escalation (the host's uname -sr); then a run
#      from the subdirectory src/ (the same Domain, the command starts in
#      /workspace/src), a command left running, lazaret state list, and
#      lazaret stop (the command is told why and exits 125)
#   9. on a terminal: a host escalation that asks you (approve it with y),
#      then lazaret run default, an interactive shell in the sandbox (type
#      exit to leave); its exit status is the demo's
#
# The demo image is a Debian 12 minbase with git, debootstrapped offline into
# an OCI layout (tests/images/build.sh, cached in /var/cache/lazaret-test-images):
# a real user would write image = "docker.io/library/debian:bookworm".
set -eu

DEMO_USER=lazaret-demo

# The demo configuration: docs' config.example.toml, embedded so the demo
# depends on nothing outside this repository. The addresses are documentation
# ranges (RFC 5737); nothing here contacts the network.
CONFIG_TEXT=$(cat <<'EOF'
# Lazaret trusted-host configuration v1: written by `make demo`.
# Only host Lazaret processes read this file; it is never visible in a sandbox.

schema = "lazaret-trusted-host-config-v1"

[storage]
data_root = "~/.local/share/lazaret"

[network]
default_allow = ["192.0.2.53/32", "198.51.100.53/32"]

[profiles.default]
# An OCI layout built offline by `make demo`; normally a registry reference
# such as "docker.io/library/debian:bookworm".
image = "oci:/var/cache/lazaret-test-images/debian:bookworm"
isolate_gitignored = true
persistent_dirs = ["/root"]
allow_egress = ["203.0.113.10/32"]
volumes = [
  { host = "{profile_dir}/agent-state", container = "/root/.local/state/agent", kind = "directory", access = "read-write", create = true },
]

[profiles.default.escalation]
# The sandbox may ask to run host commands (lazaret-escalate). A request
# that matches a rule exactly runs at once; any other is shown to you in the
# terminal of the session that asked, and runs only if you type y.
enabled = true
auto_approve = [
  { executable = "/usr/bin/uname", args = ["-sr"] },
]
EOF
)

say() {
    printf 'demo: %s\n' "$*"
}

# ---- as the unprivileged user ------------------------------------------------

private_runtime_dir() {
    # A 0700 directory owned by us: the standard one if logind made it,
    # else our own under /tmp (refusing one somebody else planted there).
    uid=$(id -u)
    if [ -d "/run/user/$uid" ] && [ ! -L "/run/user/$uid" ] && [ -O "/run/user/$uid" ]; then
        dir=/run/user/$uid
    else
        dir=/tmp/lazaret-demo-runtime-$uid
        mkdir -m 0700 "$dir" 2>/dev/null || true
        if [ -L "$dir" ] || [ ! -d "$dir" ] || [ ! -O "$dir" ]; then
            echo "demo: $dir exists and is not a directory of yours; remove it and retry" >&2
            exit 1
        fi
    fi
    chmod 0700 "$dir"
    printf '%s\n' "$dir"
}

user_phase() {
    bin=$1
    cd "$HOME"

    if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
        XDG_RUNTIME_DIR=$(private_runtime_dir)
        export XDG_RUNTIME_DIR
        say "XDG_RUNTIME_DIR was not set; using $XDG_RUNTIME_DIR"
    fi

    cfgdir=$HOME/.config/lazaret
    mkdir -p "$HOME/.config"
    mkdir -p -m 0700 "$cfgdir"
    cfg=$cfgdir/config.toml
    if [ -e "$cfg" ] && ! printf '%s\n' "$CONFIG_TEXT" | cmp -s - "$cfg"; then
        # Never overwrite somebody's real configuration.
        say "$cfg exists; leaving it alone and using $cfgdir/demo.toml"
        cfg=$cfgdir/demo.toml
        set -- --config "$cfg"
    else
        set --
    fi
    (umask 077 && printf '%s\n' "$CONFIG_TEXT" >"$cfg.tmp" && mv -f "$cfg.tmp" "$cfg")
    chmod 0600 "$cfg"
    say "configuration: $cfg"

    ws=$HOME/lazaret-demo-workspace
    if [ ! -d "$ws/.git" ]; then
        mkdir -p "$ws"
        git -c init.defaultBranch=main init -q "$ws"
        printf '# Lazaret demo workspace\n\nMounted read-write at /workspace in the sandbox.\n' \
            >"$ws/README.md"
        # Git-ignored files stay on the host: the sandbox sees its own copy.
        printf '.env\nnode_modules/\n' >"$ws/.gitignore"
        printf 'DEMO_SECRET=not-visible-in-the-sandbox\n' >"$ws/.env"
        git -C "$ws" add README.md .gitignore
        git -C "$ws" -c user.name="Lazaret demo" -c user.email=demo@lazaret.invalid \
            commit -q -m "Demo workspace"
    fi
    say "workspace: $ws"

    say "running: lazaret doctor"
    if ! "$bin" "$@" doctor; then
        say "doctor reported failures (fix lines above); the configuration check runs anyway"
    fi
    echo
    say "running: lazaret config check default --workspace $ws"
    "$bin" "$@" config check default --workspace "$ws"
    echo
    say "running: lazaret run default -- <a short tour of the sandbox>"
    cd "$ws"
    "$bin" "$@" run default -- sh -c '
        echo "== inside the sandbox: $(hostname), $(. /etc/os-release; echo "$PRETTY_NAME")"
        echo "== uname: $(uname -sr) (gVisor implements the kernel)"
        echo "== /workspace is your project, read-write:"; ls -la /workspace
        echo "== git works inside:"; git --no-pager -C /workspace log --oneline -3
        echo "== your home directory is not here:"; ls /home 2>&1 || true
        echo "== and neither is the configuration: $(ls ~/.config/lazaret 2>&1)"
        echo "== /root persists across sandbox restarts (persistent_dirs):"
        echo "   runs of this demo so far: $(echo x >> /root/.demo-runs; wc -l < /root/.demo-runs)"
        echo "== a host command, auto-approved by the rule for /usr/bin/uname -sr:"
        lazaret-escalate --why "show the host kernel" -- /usr/bin/uname -sr'
    status=$?
    echo
    mkdir -p "$ws/src"
    say "running from the subdirectory src/: the workspace is still the repository, $ws"
    (cd "$ws/src" && "$bin" "$@" run default -- sh -c '
        echo "== the command starts in $(pwd)"
        echo "== the same Domain as from the top: /root/.demo-runs has $(wc -l < /root/.demo-runs) line(s)"')
    echo
    say "a command left running in the background: sleep 600"
    "$bin" "$@" run default -- sleep 600 </dev/null >"$HOME/.demo-stop.out" 2>&1 &
    bg=$!
    tries=0
    until "$bin" "$@" status 2>/dev/null | grep -q "streams, client pid"; do
        tries=$((tries + 1))
        if [ "$tries" -ge 120 ]; then
            break
        fi
        sleep 0.5
    done
    echo
    say "running: lazaret state list (every Domain of yours, running or not)"
    "$bin" "$@" state list
    echo
    say "running: lazaret stop (ends the workspace's Domain cleanly)"
    "$bin" "$@" stop
    bgstatus=0
    wait "$bg" || bgstatus=$?
    say "the background command ended with status $bgstatus; it was told:"
    sed 's/^/    /' "$HOME/.demo-stop.out"
    if [ -t 0 ] && [ -t 1 ]; then
        echo
        say "a host command no rule approves: Lazaret asks you (type y and Enter to run it)"
        "$bin" "$@" run default -- sh -c 'lazaret-escalate --why "show who runs the host side" \
            -- /usr/bin/id; echo "== lazaret-escalate exited $? (250: you denied it)"' || true
        echo
        say "opening an interactive shell in the sandbox (lazaret run default); type exit to leave"
        exec "$bin" "$@" run default
    fi
    say "not on a terminal: skipping the interactive shell (run 'make demo' in a terminal)"
    exit "$status"
}

if [ "${1:-}" = "--user-phase" ]; then
    user_phase "$2"
fi

# ---- as the invoking user (root or not) ----------------------------------------

cd "$(dirname "$0")/.."
repo=$(pwd)
scripts/install-deps.sh
scripts/build.sh release build
bin=$repo/build/src/cli/lazaret
# The demo image (root: debootstrap and root-owned image files).
if [ "$(id -u)" -eq 0 ]; then
    tests/images/build.sh
else
    sudo tests/images/build.sh
fi

if [ "$(id -u)" -ne 0 ]; then
    user_phase "$bin"
fi

# Root: Lazaret refuses uid 0, so the demo runs as an unprivileged user.
if ! getent passwd "$DEMO_USER" >/dev/null; then
    say "creating the unprivileged user $DEMO_USER"
    useradd --create-home --shell /bin/bash "$DEMO_USER"
fi
uid=$(id -u "$DEMO_USER")
gid=$(id -g "$DEMO_USER")
home=$(getent passwd "$DEMO_USER" | cut -d: -f6)

# useradd normally allocates subordinate ids; add a free range when not.
for kind in uid gid; do
    if ! awk -F: -v u="$DEMO_USER" -v n="$uid" \
        '($1 == u || $1 == n) && $3 >= 65536 { found = 1 } END { exit !found }' \
        "/etc/sub$kind" 2>/dev/null; then
        start=$(cat /etc/subuid /etc/subgid 2>/dev/null | awk -F: '
            NF == 3 && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ { s[++n] = $2; c[n] = $3 }
            END {
                x = 100000; moved = 1
                while (moved) {
                    moved = 0
                    for (i = 1; i <= n; i++)
                        if (s[i] < x + 65536 && x < s[i] + c[i]) { x = s[i] + c[i]; moved = 1 }
                }
                print x
            }')
        say "adding subordinate ${kind}s $start-$((start + 65535)) for $DEMO_USER"
        usermod "--add-sub${kind}s" "$start-$((start + 65535))" "$DEMO_USER"
    fi
done

# The repository may live where the demo user cannot read (/root/...): give it
# its own copy of the binary, as a user install would.
for d in "$home/.local" "$home/.local/bin"; do
    [ -d "$d" ] || install -d -m 0755 -o "$uid" -g "$gid" "$d"
done
install -m 0755 -o "$uid" -g "$gid" "$bin" "$home/.local/bin/lazaret"
# Its guest helpers live beside it (a real install puts them in libexec/lib).
install -m 0755 -o "$uid" -g "$gid" "$repo/build/src/cli/lazaret-exec" "$home/.local/bin/lazaret-exec"
install -m 0755 -o "$uid" -g "$gid" "$repo/build/src/cli/lazaret-escalate" \
    "$home/.local/bin/lazaret-escalate"
install -m 0644 -o "$uid" -g "$gid" "$repo/build/src/cli/lazaret-statx-fix.so" \
    "$home/.local/bin/lazaret-statx-fix.so"
# The manual page and the shell completions, where man(1), bash-completion
# and zsh look in a user's own tree (a system install: meson install).
for d in "$home/.local/share" "$home/.local/share/man" "$home/.local/share/man/man1" \
    "$home/.local/share/bash-completion" "$home/.local/share/bash-completion/completions" \
    "$home/.local/share/zsh" "$home/.local/share/zsh/site-functions"; do
    [ -d "$d" ] || install -d -m 0755 -o "$uid" -g "$gid" "$d"
done
install -m 0644 -o "$uid" -g "$gid" "$repo/man/lazaret.1" "$home/.local/share/man/man1/lazaret.1"
install -m 0644 -o "$uid" -g "$gid" "$repo/completions/lazaret.bash" \
    "$home/.local/share/bash-completion/completions/lazaret"
install -m 0644 -o "$uid" -g "$gid" "$repo/completions/_lazaret" \
    "$home/.local/share/zsh/site-functions/_lazaret"

# The Network Sidecar's slirp4netns opens /dev/net/tun as the demo user:
# desktops ship it 0666; some servers 0600 (lazaret doctor explains).
if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
    say "making /dev/net/tun usable by unprivileged users (chmod 0666, as on desktops)"
    chmod 0666 /dev/net/tun
fi

# logind creates /run/user/UID at login; runuser does not log in.
if [ ! -d "/run/user/$uid" ]; then
    mkdir -p -m 0755 /run/user
    install -d -m 0700 -o "$uid" -g "$gid" "/run/user/$uid"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$repo/scripts/demo.sh" "$tmp/demo.sh"
chmod 0755 "$tmp"
chmod 0644 "$tmp/demo.sh"
say "continuing as $DEMO_USER (uid $uid)"
cd /
status=0
runuser -u "$DEMO_USER" -- env -i \
    HOME="$home" USER="$DEMO_USER" LOGNAME="$DEMO_USER" SHELL=/bin/bash \
    PATH="$home/.local/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    XDG_RUNTIME_DIR="/run/user/$uid" \
    /bin/sh "$tmp/demo.sh" --user-phase "$home/.local/bin/lazaret" || status=$?
exit "$status"
