#!/usr/bin/env bash
# cyclix testbed: a Debian trixie system (systemd 257 as PID 1, a lingering
# user manager, rootless podman 5.4 + quadlet, netavark/aardvark-dns, pasta)
# booted with systemd-nspawn on a host whose PID 1 is NOT systemd and whose
# cgroups may be v1-hybrid. Adapted from the recipe in
# ../shared/testbed/reference-setup.sh; "NOTES fact N" below points to the
# numbered facts in ../shared/testbed/NOTES.md. See testbed/README.md.
#
# Usage (as root on the host):
#   testbed.sh up           build/refresh the cached rootfs and images if needed, boot,
#                           import the base images (idempotent, flock-serialised: safe
#                           to call from parallel test processes)
#   testbed.sh user CMD...  run CMD as `cyx` (uid 1000) inside, as a transient unit of
#                           cyx's systemd user manager (same cgroup/env a real login
#                           has); stdin/stdout/stderr and the exit status pass through
#   testbed.sh root CMD...  run CMD as root inside (transient system service, same I/O rules)
#   testbed.sh nsenter CMD... raw nsenter as root (debugging; stays in a HOST cgroup)
#   testbed.sh selftest     prove the stack works and print timings
#   testbed.sh status | down | purge   (purge also deletes the cache in $TB_DIR)
#
# Inside, the project root (the parent of this script's directory) is bound
# read-only at /src, so /src/target/debug/cyclix and /src/tests/golden are
# visible; the base-image tars are bound read-only at /opt/testbed-images.
#
# The "outside world" (all inside the testbed's PRIVATE netns, on tb1; nothing
# here touches the host's real network). The public names use documentation
# ranges (RFC 5737), which a production egress policy treats as public, so
# positive controls go through the same deny list as production; the deny
# list is never weakened for tests:
#   203.0.113.10/32   allowed.example   busybox httpd :80 and :8080, /srv/www/allowed
#                                       (page "hello-from-allowed.example")
#   198.51.100.10/32  denied.example    busybox httpd :80, /srv/www/denied
#                                       (page "hello-from-denied.example")
#   10.78.0.1/24      private.example   busybox httpd :8080, /srv/www/private
#                                       (page "hello-from-outside"; a PRIVATE address:
#                                       the production policy must deny it)
#   203.0.113.10:443  allowed.example   TLS or not (testbed/fixtures/outside_tls.py allowed):
#                                       TLS gets "hello-from-allowed.example-tls", other bytes
#                                       an SSH-like banner + echo (tunnel tests, issue 13)
#   203.0.113.10:2525 allowed.example   a junk-tolerant line service, no TLS (outside_tls.py line):
#                                       answers every line, logs what it received to
#                                       /run/testbed-line/received.jsonl (issue 31's tunnel tests)
#   203.0.113.20/32   api.example       :443 TLS stand-in of a model API host; records every
#                                       request in /run/testbed-api/requests.jsonl
#                                       (testbed/fixtures/outside_tls.py api); the model APIs
#                                       answer scripts a test writes (as root) to
#                                       /run/testbed-api/scripts/<model>.json and record to
#                                       /run/testbed-api/results/<model>.jsonl
#                                       (testbed/fixtures/standin_api.py; both dirs are made
#                                       by the fixture at start, root-writable, world-readable)
# The TLS listeners' certificate (SAN allowed.example, api.example) comes from a test CA made
# once per rootfs; its certificate is /srv/testbed-ca.pem inside (world-readable; tests give it
# to the proxy through the spec's `egress.ca_certs`).
# The names are in the testbed's /etc/hosts; podman copies the host's
# /etc/hosts into containers (containers.conf base_hosts_file default), so
# containers (e.g. the squid proxy) resolve them too. Nothing serves DNS:
# /etc/resolv.conf points at 10.78.0.1, so other names fail fast. Tests may
# add files under /srv/www/* as root (e.g. a dumb-HTTP git repo after
# `git update-server-info`); the volatile boot discards them at `down`.
#
# Tunables (env): TB_SUITE TB_DIR TB_MACHINE TB_USER TB_UID TB_SUBID TB_MIRROR
#   TB_SUITE=trixie (default) or bookworm (Debian 12: systemd 252, podman 4.3.1 without Quadlet;
#                 its own default TB_DIR/TB_MACHINE; see testbed/README.md "The bookworm flavour").
#   TB_VOLATILE=1 (default) boots the rootfs with --volatile=overlay: every `up`
#                 after a `down` is a pristine machine; nothing is written to the cache.
#   TB_BIND / TB_BIND_RO: extra space-separated nspawn --bind/--bind-ro specs
#                 (e.g. TB_BIND_RO="/some/dir:/mnt/x").
#   TB_DEBIAN_IMAGE=0 skips building/importing the debian:trixie base image.
#   TB_ENV="K=V ..." extra environment for `user`/`root`; TB_WORKDIR for `user`.
#   TB_AGENT_PACKAGES="claude-code codex gemini-cli aider" (default): the agent presets whose pinned packages
#                 `up` fetches on the HOST (scripts/fetch-agent-packages; a cached file costs no
#                 network) into ${CYCLIX_PACKAGES:-/var/tmp/cyclix-packages}, bound read-only at
#                 /opt/cyclix-packages inside; empty skips the fetch (the bind stays).
set -euo pipefail

# The flavour (issue 18): trixie (systemd 257, podman 5.4 + Quadlet, pasta; the default) or
# bookworm (Debian 12 as users have it: systemd 252, podman 4.3.1 without Quadlet, slirp4netns,
# netavark 1.4; cyclix uses its plain backend there). Each flavour has its own cache and
# machine name by default.
# What the hints below print to call this script again for THIS machine: the variables that
# picked it (a private TB_DIR/TB_MACHINE, a flavour), then the path. A bare '$0 down' copied
# from a private testbed's hint would act on the shared default one.
SELF=$0
[ -z "${TB_SUITE:-}" ] || [ "$TB_SUITE" = trixie ] || SELF="TB_SUITE=$TB_SUITE $SELF"
[ -z "${TB_MACHINE:-}" ] || SELF="TB_MACHINE=$TB_MACHINE $SELF"
[ -z "${TB_DIR:-}" ] || SELF="TB_DIR=$TB_DIR $SELF"
TB_SUITE=${TB_SUITE:-trixie}
case "$TB_SUITE" in
  trixie)   TB_DIR=${TB_DIR:-/var/tmp/cyclix-tb}; TB_MACHINE=${TB_MACHINE:-cyclix-tb} ;;
  bookworm) TB_DIR=${TB_DIR:-/var/tmp/cyclix-tb-bookworm}; TB_MACHINE=${TB_MACHINE:-cyclix-tb-bookworm} ;;
  *) printf 'testbed: TB_SUITE=%s is not a flavour; use trixie or bookworm\n' "$TB_SUITE" >&2; exit 2 ;;
esac
TB_USER=${TB_USER:-cyx}
TB_UID=${TB_UID:-1000}
# Sub-id range of the test user inside. Kept away from the host's own ranges
# (host user tst uses 100000) because nspawn runs WITHOUT a user namespace:
# container uids == host uids, so overlapping ranges would share file
# ownership (NOTES fact 11).
TB_SUBID=${TB_SUBID:-200000}
TB_MIRROR=${TB_MIRROR:-http://deb.debian.org/debian}
TB_VOLATILE=${TB_VOLATILE:-1}
TB_BIND=${TB_BIND:-}
TB_BIND_RO=${TB_BIND_RO:-}
TB_DEBIAN_IMAGE=${TB_DEBIAN_IMAGE:-1}
# Where an already built debian image tar may be (build_debian_tar); the bookworm flavour
# looks in the trixie flavour's default cache.
TB_IMAGE_FROM=${TB_IMAGE_FROM-}
[ "$TB_SUITE" = bookworm ] && TB_IMAGE_FROM=${TB_IMAGE_FROM:-/var/tmp/cyclix-tb/images}
TB_AGENT_PACKAGES=${TB_AGENT_PACKAGES-claude-code codex gemini-cli aider}
AGENT_PACKAGES_DIR=${CYCLIX_PACKAGES:-/var/tmp/cyclix-packages}

# The project root: the parent of the directory holding this script.
PROJECT_ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
BASE_PACKAGES_FILE=$PROJECT_ROOT/images/base-packages.txt

ROOTFS=$TB_DIR/rootfs
IMAGES=$TB_DIR/images
PIDFILE=$TB_DIR/nspawn.pid
LOG=$TB_DIR/nspawn.log
BINDS_FILE=$TB_DIR/binds
# Outside $TB_DIR so that `purge` can delete the cache while holding the lock.
LOCK=$TB_DIR.lock
# Everything the inside needs. Recommends are off, so list what podman would
# otherwise pull: crun, conmon, passt (pasta = rootless default network),
# netavark + aardvark-dns (bridge networks + DNS), nftables (netavark's firewall
# driver shells out to `nft`), uidmap (newuidmap/newgidmap), catatonit (pod
# infra/--init), dbus-user-session (user bus at /run/user/UID/bus),
# libpam-systemd (logind sessions + linger -> user@UID.service),
# systemd-container (machined, needed by `systemd-run -M user@ --user`),
# busybox-static (source of the tiny scratch image and the HTTP test hosts),
# git (cyclix drives git worktrees on the host side), python3 (test helpers).
# man-db (`man cyclix` after `cyclix install`, and systemd-analyze verify checks man: links).
# prometheus (for its promtool: e2e_metrics checks the metrics file cyclix writes with
# `promtool check metrics`; the server itself is masked in configure_rootfs).
# runsc (Debian's gVisor: trixie 0.0~20240729, bookworm 0.0~20221219) for tier `gvisor`.
PKGS=systemd,systemd-sysv,systemd-container,dbus,dbus-user-session,libpam-systemd,podman,crun,conmon,passt,netavark,aardvark-dns,nftables,uidmap,catatonit,iproute2,busybox-static,procps,less,git,python3,openssl,man-db,prometheus,runsc
# The image the project's Containerfiles start FROM (debian:trixie) whatever the host flavour.
IMAGE_SUITE=trixie
# systemd-run >= 254 expands $VAR in the command unless told not to (see in_root_unit);
# systemd 252 (bookworm) has no such option.
NOEXPAND=(--expand-environment=no)
if [ "$TB_SUITE" = bookworm ]; then
  # Podman 4.3's rootless network is slirp4netns (pasta came with 4.4 / 5.0); netavark 1.4
  # (Recommends of containers-common) for the bridge networks, iptables for its firewall
  # driver (netavark 1.4 has no nftables driver).
  PKGS=${PKGS/passt,/slirp4netns,}
  PKGS=${PKGS/nftables,/iptables,}
  # promtool is for e2e_metrics, which the bookworm subset does not run.
  PKGS=${PKGS/,prometheus/}
  NOEXPAND=()
fi
# Bump the leading version when configure_rootfs changes in a way that needs a
# re-bootstrap (plain config edits are re-applied on every `up` anyway).
STAMP_WANT="v5 $TB_SUITE $PKGS"

log() { printf '[testbed %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (e.g. sudo $0 ${1:-up})"

# Serialise up/down/purge across processes (parallel test binaries all call
# `up`). fd 9 must NOT leak into the long-lived nspawn process (see boot),
# or the lock would stay held for the machine's whole lifetime.
take_lock() {
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  flock -w 900 9 || die "timed out waiting for $LOCK (another testbed.sh up/down running?)"
}

nspawn_pid() {
  local p
  [ -f "$PIDFILE" ] || return 1
  p=$(cat "$PIDFILE")
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && grep -q systemd-nspawn "/proc/$p/cmdline" 2>/dev/null || return 1
  echo "$p"
}
# Container PID 1 = the oldest child of the nspawn process.
leader_pid() { local n; n=$(nspawn_pid) || return 1; pgrep -o -P "$n"; }
running() { leader_pid >/dev/null 2>&1; }
not_running() { die "testbed not running; run '$SELF up' first"; }
# `user`, `root` and `nsenter` go only into a machine that shows THIS checkout at /src: without
# TB_DIR/TB_MACHINE every checkout names the default machine, and a command meant for one's own
# testbed would run, unwarned, in another checkout's (its cyclix, its runs). `status` and `down`
# still work from anywhere (a machine of another checkout must be stoppable).
this_checkout() {
  local have; have=$(cat "$BINDS_FILE" 2>/dev/null || true)
  [ -z "$have" ] || [ "${have%% bind=*}" = "src=$PROJECT_ROOT" ] && return 0
  die "testbed $TB_MACHINE runs ${have%% bind=*}, not this checkout (src=$PROJECT_ROOT): set TB_DIR and TB_MACHINE for a testbed of your own (testbed/README.md), or use that checkout's testbed.sh"
}
# Raw nsenter: fine for inspection, but the process stays in a HOST cgroup
# (/../.. seen from inside), so logind/systemd cannot map it to a unit
# (e.g. `loginctl enable-linger` -> "Protocol driver not attached"; NOTES fact 9).
in_root() { local l; l=$(leader_pid) || not_running; nsenter -t "$l" -a -- "$@"; }
# Proper root command: a transient system service of the inner PID 1.
# shellcheck disable=SC2046,SC2086 # TB_ENV is a space-separated K=V list by design
# systemd-run (v254+) substitutes `${VAR}`/`$VAR` in the command from the unit's environment
# before it runs (`${t%.timer}` came back empty): --expand-environment=no hands the command to
# bash verbatim. (`%` is not expanded for these transient units: `50%` arrives as `50%`.)
in_root_unit() {
  local l; l=$(leader_pid) || not_running
  nsenter -t "$l" -a -- systemd-run --wait --pipe --quiet --collect "${NOEXPAND[@]}" -p WorkingDirectory=/ \
    ${TB_ENV:+$(printf -- '-E %s ' $TB_ENV)} -- "$@"
}
# Run as the test user through its systemd user manager. -M user@ needs machined
# inside (systemd-container). --wait --pipe propagates I/O and the exit code.
# shellcheck disable=SC2046,SC2086
in_user() {
  local l; l=$(leader_pid) || not_running
  nsenter -t "$l" -a -- systemd-run -M "$TB_USER@" --user --wait --pipe --quiet --collect "${NOEXPAND[@]}" \
    -p WorkingDirectory="${TB_WORKDIR:-/home/$TB_USER}" ${TB_ENV:+$(printf -- '-E %s ' $TB_ENV)} -- "$@"
}

host_deps() {
  local need=()
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  command -v systemd-nspawn >/dev/null || need+=(systemd-container)
  command -v nsenter >/dev/null && command -v flock >/dev/null && command -v setsid >/dev/null || need+=(util-linux)
  command -v pgrep >/dev/null || need+=(procps)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing host packages: ${need[*]}"
    # Note: bookworm's systemd-container pins systemd to the same point release,
    # so this may upgrade the host's (unused-as-PID-1) systemd package too.
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

build_rootfs() {
  if [ -f "$ROOTFS/.testbed-stamp" ] && [ "$(cat "$ROOTFS/.testbed-stamp")" = "$STAMP_WANT" ]; then
    log "rootfs cache hit: $ROOTFS"
    # Re-apply the (idempotent, ~0.3 s) configuration so edits to this script take
    # effect without a re-bootstrap; never touch the lower dir of a running overlay.
    running || configure_rootfs "$ROOTFS"
    return
  fi
  running && die "testbed is running with an outdated rootfs; run '$SELF down' first"
  log "bootstrapping $TB_SUITE rootfs (mmdebstrap and its configuration: about 1-2 min)"
  rm -rf "$ROOTFS.new"
  mkdir -p "$TB_DIR"
  # mmdebstrap (not debootstrap): resolves --include with apt in one pass; measured
  # 16-18 s for this set vs 43 s (and 446 MB) for debootstrap --variant=minbase.
  # force-unsafe-io: dpkg skips its fsync()s while unpacking. Safe here: the
  # build goes to a temp dir that only an atomic rename makes the cache, so a
  # crash mid-build just means a rebuild (measured 25-37 s vs 35 s, noisy).
  mmdebstrap --variant=minbase --mode=root --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt=force-unsafe-io --include="$PKGS" "$TB_SUITE" "$ROOTFS.new" "$TB_MIRROR" >"$TB_DIR/mmdebstrap.log" 2>&1 \
    || { tail -20 "$TB_DIR/mmdebstrap.log" >&2; die "mmdebstrap failed (full log: $TB_DIR/mmdebstrap.log)"; }
  configure_rootfs "$ROOTFS.new"
  echo "$STAMP_WANT" >"$ROOTFS.new/.testbed-stamp"
  rm -rf "$ROOTFS"; mv "$ROOTFS.new" "$ROOTFS"      # atomic: a half-built rootfs never counts as cache
}

# One TLS fixture listener (testbed/fixtures/outside_tls.py): name, mode, listen address.
tls_unit() {
  local R=$1 name=$2 mode=$3 listen=$4
  cat >"$R/etc/systemd/system/testbed-tls-$name.service" <<EOF
[Unit]
Description=Testbed "outside" TLS listener $listen ($mode)
Requires=testbed-net.service
After=testbed-net.service
[Service]
ExecStart=/usr/bin/python3 /usr/local/lib/testbed/outside_tls.py $mode $listen
[Install]
WantedBy=multi-user.target
EOF
}

# The test CA and the listeners' certificate (made once per rootfs with the rootfs' openssl).
make_test_ca() {
  local R=$1 d=$1/etc/testbed-tls
  [ -s "$d/server.pem" ] && [ -s "$R/srv/testbed-ca.pem" ] && return 0
  mkdir -p "$d"
  chroot "$R" sh -ec '
    cd /etc/testbed-tls
    openssl req -x509 -newkey rsa:2048 -nodes -days 36500 -subj "/CN=cyclix testbed CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -keyout ca.key -out ca.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=api.example" -keyout server.key -out server.csr 2>/dev/null
    printf "subjectAltName=DNS:api.example,DNS:allowed.example\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n" >ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 36500 -extfile ext -out server.pem 2>/dev/null
    rm -f server.csr ext; chmod 0600 ca.key server.key' || die "making the testbed test CA failed"
  install -m 0644 "$d/ca.pem" "$R/srv/testbed-ca.pem"
}

# One busybox httpd per listener: name, listen address (ip:port), document root.
http_unit() {
  local R=$1 name=$2 listen=$3 root=$4
  cat >"$R/etc/systemd/system/testbed-http-$name.service" <<EOF
[Unit]
Description=Testbed "outside" HTTP listener $listen ($root)
Requires=testbed-net.service
After=testbed-net.service
[Service]
ExecStart=/usr/bin/busybox httpd -f -p $listen -h $root
[Install]
WantedBy=multi-user.target
EOF
}

configure_rootfs() {
  local R=$1
  echo "$TB_MACHINE" >"$R/etc/hostname"
  : >"$R/etc/machine-id"                  # empty => nspawn hands PID 1 a fresh transient id each boot
  chroot "$R" id "$TB_USER" >/dev/null 2>&1 || chroot "$R" useradd -m -u "$TB_UID" -s /bin/bash "$TB_USER"
  # useradd auto-adds a subuid range (SUB_UID_MIN=100000); force our own range
  # (NOTES fact 11).
  echo "$TB_USER:$TB_SUBID:65536" >"$R/etc/subuid"
  echo "$TB_USER:$TB_SUBID:65536" >"$R/etc/subgid"
  # = `loginctl enable-linger`: logind starts user@UID.service at boot, giving a
  # user manager + user bus without any login. Done offline because inside,
  # polkit is absent and a raw nsenter can't talk to logind (NOTES fact 10).
  mkdir -p "$R/var/lib/systemd/linger"; : >"$R/var/lib/systemd/linger/$TB_USER"
  # `cyclix` on PATH inside (the host-built binary through the /src bind; dangling until
  # the first `cargo build`).
  ln -sfn /src/target/debug/cyclix "$R/usr/local/bin/cyclix"
  # Parents of the tmpfs that holds podman storage must belong to the user.
  install -d -o "$TB_UID" -g "$TB_UID" "$R/home/$TB_USER/.local" "$R/home/$TB_USER/.local/share" \
    "$R/home/$TB_USER/.local/share/containers" "$R/home/$TB_USER/.config"
  # Deterministic resolver: 10.78.0.1 (ours) has no DNS server, so external names
  # fail fast (pasta forwards container DNS at 169.254.1.1 to this address).
  rm -f "$R/etc/resolv.conf"; echo "nameserver 10.78.0.1" >"$R/etc/resolv.conf"
  # The "outside world" names (see the header). Podman copies these entries
  # into every container's /etc/hosts.
  cat >"$R/etc/hosts" <<EOF
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
127.0.1.1	$TB_MACHINE
# testbed "outside world" (testbed/testbed.sh header)
203.0.113.10	allowed.example
198.51.100.10	denied.example
10.78.0.1	private.example
203.0.113.20	api.example
EOF
  # The cgroup2 tree nspawn gets here has NO controllers (host binds pids/cpu/memory
  # to v1), so podman's default pids_limit=2048 makes crun fail with
  # "controller `pids` is not available under .../cgroup.controllers" (NOTES fact 5).
  mkdir -p "$R/etc/containers"
  cat >"$R/etc/containers/containers.conf" <<'EOF'
# testbed: no cgroup controllers are delegated (host is cgroup-v1 hybrid).
[containers]
pids_limit = 0
EOF
  # Network inside the private netns (only lo at start). pasta (rootless default
  # network and the rootless-netns behind bridge networks) copies the address and
  # gateway of the default-route interface; with only lo it falls back to
  # "local mode" 169.254.2.1 (works, but unlike a real host). So build a host-like
  # layout from a veth pair (the kernel has no `dummy` driver): tb0 = "uplink"
  # 10.77.0.1/24 + default route via 10.77.0.254 (nothing there; pasta only copies
  # it), tb1 = 10.78.0.1/24 plus the documentation-range /32s = stand-ins for
  # OUTSIDE hosts. Containers reach them through their default route -> pasta ->
  # a socket in this netns, which delivers locally. Nothing here is connected to
  # the VM's real network (NOTES fact 7).
  # nspawn copies /dev/net/tun into its private /dev with the host's mode 0600;
  # rootless pasta needs 0666 (chmod only touches the container's tmpfs node;
  # NOTES fact 4).
  cat >"$R/etc/systemd/system/testbed-net.service" <<'EOF'
[Unit]
Description=Testbed veth pair, outside-world addresses, /dev/net/tun mode
DefaultDependencies=no
After=systemd-sysctl.service
Before=network.target network-online.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/chmod 0666 /dev/net/tun
ExecStart=-/usr/sbin/ip link add tb0 type veth peer name tb1
ExecStart=/usr/sbin/ip addr replace 10.77.0.1/24 dev tb0
ExecStart=/usr/sbin/ip addr replace 10.78.0.1/24 dev tb1
ExecStart=/usr/sbin/ip addr replace 203.0.113.10/32 dev tb1
ExecStart=/usr/sbin/ip addr replace 198.51.100.10/32 dev tb1
ExecStart=/usr/sbin/ip addr replace 203.0.113.20/32 dev tb1
ExecStart=/usr/sbin/ip link set tb0 up
ExecStart=/usr/sbin/ip link set tb1 up
ExecStart=/usr/sbin/ip route replace default via 10.77.0.254 dev tb0
[Install]
WantedBy=multi-user.target network-online.target
EOF
  # Podman >= 5 makes every rootless quadlet unit Want/After
  # podman-user-wait-network-online.service, which polls the SYSTEM
  # network-online.target for up to 90 s. Nothing pulls that target in a
  # minimal system -> every quadlet start stalls exactly 90 s. Pull it at boot
  # (NOTES fact 6; a real host gets it from NetworkManager/networkd-wait-online).
  mkdir -p "$R/etc/systemd/system/multi-user.target.wants"
  ln -sf /usr/lib/systemd/system/network-online.target "$R/etc/systemd/system/multi-user.target.wants/network-online.target"
  mkdir -p "$R/srv/www/private" "$R/srv/www/allowed" "$R/srv/www/denied"
  echo "hello-from-outside" >"$R/srv/www/private/index.html"
  echo "hello-from-allowed.example" >"$R/srv/www/allowed/index.html"
  echo "hello-from-denied.example" >"$R/srv/www/denied/index.html"
  rm -f "$R/etc/systemd/system/testbed-http.service" "$R/etc/systemd/system/multi-user.target.wants/testbed-http.service"
  http_unit "$R" private 10.78.0.1:8080 /srv/www/private
  http_unit "$R" allowed 203.0.113.10:80 /srv/www/allowed
  http_unit "$R" allowed-8080 203.0.113.10:8080 /srv/www/allowed
  http_unit "$R" denied 198.51.100.10:80 /srv/www/denied
  make_test_ca "$R"
  install -D -m 0644 "$PROJECT_ROOT/testbed/fixtures/outside_tls.py" "$R/usr/local/lib/testbed/outside_tls.py"
  install -D -m 0644 "$PROJECT_ROOT/testbed/fixtures/standin_api.py" "$R/usr/local/lib/testbed/standin_api.py"
  tls_unit "$R" allowed allowed 203.0.113.10:443
  tls_unit "$R" api api 203.0.113.20:443
  tls_unit "$R" line line 203.0.113.10:2525
  systemctl --root="$R" enable testbed-net.service testbed-http-private.service testbed-http-allowed.service \
    testbed-http-allowed-8080.service testbed-http-denied.service testbed-tls-allowed.service \
    testbed-tls-api.service testbed-tls-line.service >/dev/null 2>&1
  if [ "$TB_SUITE" = bookworm ]; then
    # Debian 12 ships no storage.conf without containers-storage (a Suggests), and podman
    # 4.3 then picks vfs for rootless storage (a full copy of every layer). Native overlay
    # works on this kernel (fuse-overlayfs, podman's Recommends, needs a /dev/fuse nspawn
    # does not give): say overlay, as containers-storage's storage.conf does.
    printf '%s\n' '# testbed (bookworm): the driver of containers-storage'"'"'s storage.conf.' '[storage]' \
      'driver = "overlay"' 'runroot = "/run/containers/storage"' \
      'graphroot = "/var/lib/containers/storage"' >"$R/etc/containers/storage.conf"
    # The system (root) podman services podman 4.3 enables fail on the overlay root
    # ("'overlay' is not supported over overlayfs") and are not cyclix's: masked.
    systemctl --root="$R" mask podman.service podman.socket podman-restart.service \
      podman-auto-update.service podman-auto-update.timer >/dev/null 2>&1
  fi
  # The prometheus package is there for promtool only: its server (and the node exporter,
  # should a Recommends ever come along) never runs in the testbed.
  systemctl --root="$R" mask prometheus.service prometheus-node-exporter.service >/dev/null 2>&1
  # No tty is attached (--console=pipe): a console getty would just respawn.
  systemctl --root="$R" mask console-getty.service systemd-networkd-wait-online.service >/dev/null 2>&1
}

# The debian base image's package list: images/base-packages.txt, one per line, # comments.
base_packages() {
  [ -r "$BASE_PACKAGES_FILE" ] || die "missing $BASE_PACKAGES_FILE (the debian base image package list)"
  sed -e 's/#.*//' "$BASE_PACKAGES_FILE" | tr -s ' \t\n' '\n' | sed '/^$/d' | paste -sd, -
}

build_busybox_tar() {
  mkdir -p "$IMAGES"
  [ -s "$IMAGES/busybox.tar" ] && return 0
  if [ "$TB_SUITE" = bookworm ]; then
    # bookworm's busybox-static 1.35 wget dies with SIGSEGV on every failed connect
    # (refused or unreachable: measured), which breaks every reachability probe; the image
    # is not the host under test, so the bookworm flavour takes the trixie flavour's.
    [ -s "$TB_IMAGE_FROM/busybox.tar" ] \
      || die "the bookworm flavour takes the busybox image from the trixie flavour's cache ($TB_IMAGE_FROM): run 'testbed/testbed.sh up' (trixie) first, or set TB_IMAGE_FROM"
    log "busybox image tarball: linking the trixie one in $TB_IMAGE_FROM"
    ln -f "$TB_IMAGE_FROM/busybox.tar" "$IMAGES/busybox.tar" 2>/dev/null || cp "$TB_IMAGE_FROM/busybox.tar" "$IMAGES/busybox.tar"
    return 0
  fi
  log "building busybox scratch image tarball"
  local B; B=$(mktemp -d "$TB_DIR/bb.XXXX")
  mkdir -p "$B"/{bin,etc,tmp,proc,sys,dev,root}; chmod 1777 "$B/tmp"
  cp "$ROOTFS/usr/bin/busybox" "$B/bin/busybox"       # static, from busybox-static
  for a in $("$B/bin/busybox" --list); do [ -e "$B/bin/$a" ] || ln -s busybox "$B/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$B/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$B/etc/group"
  tar --numeric-owner -C "$B" -cf "$IMAGES/busybox.tar.tmp" . && mv "$IMAGES/busybox.tar.tmp" "$IMAGES/busybox.tar"
  rm -rf "$B"
}

# The stamp records suite + package list; a changed images/base-packages.txt
# rebuilds the tar, and import_images re-imports when the image's label differs.
debian_stamp_want() { echo "v1 $IMAGE_SUITE $(base_packages)"; }
debian_tar_fresh() {
  [ "$TB_DEBIAN_IMAGE" != 1 ] && return 0
  [ -s "$IMAGES/debian-trixie.tar" ] && [ "$(cat "$IMAGES/debian-trixie.stamp" 2>/dev/null)" = "$(debian_stamp_want)" ]
}
build_debian_tar() {
  mkdir -p "$IMAGES"
  local want tmp; want=$(debian_stamp_want); tmp=$IMAGES/debian-trixie.tar.tmp
  # The same tar another flavour's cache already holds (the same stamp: same suite, same
  # packages) is linked instead of built again: the bookworm flavour takes the trixie one.
  if [ -n "$TB_IMAGE_FROM" ] && [ -s "$TB_IMAGE_FROM/debian-trixie.tar" ] \
    && [ "$(cat "$TB_IMAGE_FROM/debian-trixie.stamp" 2>/dev/null)" = "$want" ]; then
    log "debian image tarball: linking the one in $TB_IMAGE_FROM (same stamp)"
    ln -f "$TB_IMAGE_FROM/debian-trixie.tar" "$tmp" 2>/dev/null || cp "$TB_IMAGE_FROM/debian-trixie.tar" "$tmp"
    mv "$tmp" "$IMAGES/debian-trixie.tar"; echo "$want" >"$IMAGES/debian-trixie.stamp"
    return 0
  fi
  log "building debian trixie minbase image tarball with $(base_packages) (~30 s)"
  rm -f "$tmp"
  # --format=tar is required: without it a "*.tar.tmp" target becomes a
  # directory (NOTES fact 12). Docs/man/locales are left out to keep it small.
  # force-unsafe-io as for the rootfs: the tar only counts once renamed.
  mmdebstrap --variant=minbase --mode=root --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt=force-unsafe-io --include="$(base_packages)" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --format=tar "$IMAGE_SUITE" "$tmp" "$TB_MIRROR" >"$TB_DIR/mmdebstrap-image.log" 2>&1 \
    || { rm -f "$tmp"; tail -20 "$TB_DIR/mmdebstrap-image.log" >&2; die "image mmdebstrap failed (full log: $TB_DIR/mmdebstrap-image.log)"; }
  mv "$tmp" "$IMAGES/debian-trixie.tar"
  echo "$want" >"$IMAGES/debian-trixie.stamp"
}

# Rootfs first (the busybox tar takes its busybox), then the debian image tar.
# Building the two in parallel was measured and was no faster on 2 vCPUs
# (92 s parallel vs 85 s sequential, cold, under the same load), so it stays
# sequential.
build_all() {
  mkdir -p "$TB_DIR"
  [ "$TB_DEBIAN_IMAGE" != 1 ] || [ -r "$BASE_PACKAGES_FILE" ] \
    || die "missing $BASE_PACKAGES_FILE (the debian base image package list)"
  build_rootfs
  build_busybox_tar
  debian_tar_fresh || build_debian_tar
}

# The agent preset images' packages (images/agents/packages.lock): fetched here, on the host,
# because the testbed has no internet; `cyclix images build --preset P --packages
# /opt/cyclix-packages` builds from them offline inside.
fetch_agent_packages() {
  mkdir -p "$AGENT_PACKAGES_DIR"
  [ -n "$TB_AGENT_PACKAGES" ] || return 0
  log "agent preset packages ($TB_AGENT_PACKAGES) into $AGENT_PACKAGES_DIR (npm/PyPI the first time, verified by hash; cached after)"
  # shellcheck disable=SC2086 # a space-separated preset list by design
  CYCLIX_PACKAGES=$AGENT_PACKAGES_DIR "$PROJECT_ROOT/scripts/fetch-agent-packages" $TB_AGENT_PACKAGES >/dev/null \
    || die "fetching the agent preset packages ($TB_AGENT_PACKAGES) into $AGENT_PACKAGES_DIR failed (needs internet once; TB_AGENT_PACKAGES= skips)"
}

# cgroup roots nspawn must be placed in: this VM is v1-hybrid (name=systemd v1 +
# cgroup2 at /sys/fs/cgroup/unified); a pure-v2 host has just /sys/fs/cgroup.
cg_roots() {
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then echo /sys/fs/cgroup
  else echo /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; fi
}
cleanup_cgroups() {
  local h
  for h in $(cg_roots); do
    [ -d "$h/$TB_MACHINE" ] && find "$h/$TB_MACHINE" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

# What the machine is (to be) booted with: "src=<project root>" then the extras.
binds_want() { printf 'src=%s bind=%s bind_ro=%s\n' "$PROJECT_ROOT" "$TB_BIND" "$TB_BIND_RO"; }
# A running machine is reused only if it shows THIS project at /src (another
# worktree may have booted it) and, when the caller asks for extra binds, the
# same extras. Binds are fixed at boot.
check_binds() {
  local have; have=$(cat "$BINDS_FILE" 2>/dev/null || true)
  if [ -z "$TB_BIND$TB_BIND_RO" ]; then
    [ "${have%% bind=*}" = "src=$PROJECT_ROOT" ] && return 0
  else
    [ "$have" = "$(binds_want)" ] && return 0
  fi
  die "testbed is running with other binds ($have); wanted ($(binds_want)); run '$SELF down' first"
}

boot() {
  if running; then check_binds; log "already running (nspawn pid $(nspawn_pid))"; return; fi
  cleanup_cgroups
  local args=(--boot --directory="$ROOTFS" --machine="$TB_MACHINE"
    # No systemd/machined on the host: don't register, don't ask for a scope;
    # stay in the cgroup we were started in (prepared below; NOTES fact 1).
    --register=no --keep-unit
    # Own netns with only lo; testbed-net.service adds the veth pair.
    --private-network --resolv-conf=off --timezone=off
    --console=pipe
    # nspawn's seccomp filter denies keyring syscalls; crun creates a session
    # keyring per container -> "crun: create keyring ...: Operation not permitted"
    # (NOTES fact 3; keyring=false in containers.conf would change podman instead).
    --system-call-filter="add_key keyctl request_key"
    --bind-ro="$IMAGES:/opt/testbed-images"
    --bind-ro="$AGENT_PACKAGES_DIR:/opt/cyclix-packages"
    --bind-ro="$PROJECT_ROOT:/src")
  if [ "$TB_VOLATILE" = 1 ]; then
    # / = overlay(rootfs, tmpfs): the cached rootfs stays pristine. Podman's
    # storage needs its own tmpfs: on the overlay root podman fails with
    # "'overlay' is not supported over overlayfs, a mount_program is required"
    # (NOTES fact 8).
    args+=(--volatile=overlay
      --tmpfs="/home/$TB_USER/.local/share/containers:mode=0700,uid=$TB_UID,gid=$TB_UID")
  fi
  local s; for s in $TB_BIND; do args+=(--bind="$s"); done
  for s in $TB_BIND_RO; do args+=(--bind-ro="$s"); done
  binds_want >"$BINDS_FILE"
  log "booting $TB_MACHINE (/src = $PROJECT_ROOT)"
  (
    # The flock fd must not live on in nspawn (it would hold the lock until `down`).
    exec 9>&-
    # Host is cgroup-v1 hybrid without systemd: give nspawn its own, writable
    # subtree in BOTH the name=systemd v1 and the cgroup2 ("unified") hierarchy.
    # nspawn creates payload/ and supervisor/ below it (NOTES fact 1).
    for h in $(cg_roots); do
      mkdir -p "$h/$TB_MACHINE"
      echo "$BASHPID" >"$h/$TB_MACHINE/cgroup.procs"
    done
    # Force a pure cgroup2 /sys/fs/cgroup inside. Without it nspawn mirrors the
    # host's hybrid layout: systemd 257 still boots, but podman 5 then runs on
    # cgroup v1 ("Using cgroups-v1 which is deprecated ..."), cgroupfs manager,
    # i.e. not what any production host runs (NOTES fact 2).
    export SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1
    exec setsid systemd-nspawn "${args[@]}" </dev/null >"$LOG" 2>&1
  ) &
  local i st="" p=$!
  # Wait for the subshell to exec nspawn (pid is kept: a non-leader setsid doesn't fork).
  for i in $(seq 1 50); do grep -q systemd-nspawn "/proc/$p/cmdline" 2>/dev/null && break; sleep 0.05; done
  echo "$p" >"$PIDFILE"
  for i in $(seq 1 300); do              # PID 1 needs ~1-2 s to reach multi-user.target
    nspawn_pid >/dev/null || { cat "$LOG" >&2 || true; die "nspawn exited during boot"; }
    st=""; running && st=$(in_root systemctl is-system-running 2>/dev/null || true)
    case "$st" in running|degraded) break ;; esac
    sleep 0.1
  done
  [ "$st" = running ] || { in_root systemctl --failed --no-pager >&2 || true; log "system state: ${st:-unknown}"; }
  # The user bus comes from dbus-user-session socket activation under user@UID.
  for i in $(seq 1 100); do in_root test -S "/run/user/$TB_UID/bus" && break; sleep 0.1; done
  in_root systemctl is-active -q "user@$TB_UID.service" || die "user@$TB_UID.service not active"
  log "booted: system=$st"
}

import_images() {
  # podman import works offline; tags under docker.io/library/* make
  # `FROM busybox` / `FROM debian:trixie` resolve locally (no registry here;
  # NOTES fact 12). The debian image carries its stamp as a label, so a rebuilt
  # tar is re-imported into an already running machine.
  local stamp=""
  [ "$TB_DEBIAN_IMAGE" = 1 ] && stamp=$(sha256sum <"$IMAGES/debian-trixie.stamp" | cut -c1-16)
  in_user sh -ec '
    podman image exists localhost/tb-busybox:latest || {
      podman import -q --change "CMD [\"/bin/sh\"]" /opt/testbed-images/busybox.tar localhost/tb-busybox:latest >/dev/null
      podman tag localhost/tb-busybox:latest docker.io/library/busybox:latest; }
    [ -n "$1" ] || exit 0
    have=$(podman image inspect -f "{{index .Labels \"org.cyclix.testbed.stamp\"}}" localhost/tb-debian:trixie 2>/dev/null || true)
    if [ "$have" != "$1" ]; then
      podman import -q --change "CMD [\"/bin/bash\"]" --change "LABEL org.cyclix.testbed.stamp=$1" \
        /opt/testbed-images/debian-trixie.tar localhost/tb-debian:trixie >/dev/null
      podman tag localhost/tb-debian:trixie docker.io/library/debian:trixie
    fi' sh "$stamp"
}

down() {
  local n
  if n=$(nspawn_pid); then
    log "powering off $TB_MACHINE"
    in_root systemctl poweroff --no-block >/dev/null 2>&1 || kill -TERM "$n"   # SIGTERM to nspawn also shuts PID 1 down cleanly
    local i; for i in $(seq 1 200); do kill -0 "$n" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$n" 2>/dev/null && { log "still up, SIGKILL nspawn $n"; kill -KILL "$n"; sleep 0.5; }
  fi
  rm -f "$PIDFILE" "$BINDS_FILE"; cleanup_cgroups
}

selftest() {
  running || not_running
  # Everything below runs as the test user under its systemd user manager.
  # All objects it creates are named tbst-* and only those are removed, so a
  # selftest never disturbs units/containers of tests running at the same time.
  in_user bash -s <<'EOS'
set -euo pipefail
now() { date +%s.%N; }
dt() { awk "BEGIN{printf \"%.3f\", $2-$1}"; }
ok() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; FAILED=1; }
FAILED=0; IMG=localhost/tb-busybox:latest; DEB=docker.io/library/debian:trixie
Q=$HOME/.config/containers/systemd; U=$HOME/.config/systemd/user
teardown() {
  # Stop EVERY generated unit, including the -network/-volume/-pod oneshots: they
  # are RemainAfterExit=yes, so after `podman network rm` a still-"active"
  # tbst-int-network.service is never re-run and the next start fails with
  # "unable to find network with name or ID tbst-int: network not found".
  systemctl --user stop 'tbst*' 2>/dev/null || true
  systemctl --user reset-failed 'tbst*' 2>/dev/null || true
  rm -f "$Q"/tbst* "$U"/tbst*
  systemctl --user daemon-reload
  podman pod rm -f tbst >/dev/null 2>&1 || true
  podman rm -f tbst-agent tbst-proxy tbst-gate >/dev/null 2>&1 || true
  podman network rm -f tbst-int tbst-ext st-int st-ext >/dev/null 2>&1 || true
  podman volume rm -f tbst-data >/dev/null 2>&1 || true
  podman rmi -f localhost/tbst-derived >/dev/null 2>&1 || true
}
teardown
echo "versions: $(systemctl --version | head -1) | $(podman --version) | crun $(crun --version | sed -n 1p | awk '{print $3}')"
podman info --format 'cgroups={{.Host.CgroupsVersion}} manager={{.Host.CgroupManager}} net={{.Host.NetworkBackend}} rootless={{.Host.Security.Rootless}} driver={{.Store.GraphDriverName}}'
# -- 1. rootless podman run + timing
t0=$(now); podman run --rm $IMG true; t1=$(now); echo "TIME podman run --rm true (first): $(dt $t0 $t1)s"
t0=$(now); for i in 1 2 3; do podman run --rm $IMG true; done; t1=$(now)
echo "TIME podman run --rm true (avg of 3): $(awk "BEGIN{printf \"%.3f\", ($t1-$t0)/3}")s"
[ "$(podman run --rm $IMG id -u)" = 0 ] && ok "rootless podman run" || bad "rootless podman run"
# -- 2. podman build FROM an imported image, offline
printf 'FROM busybox\nRUN echo built > /built\n' >/tmp/tbst-Containerfile
t0=$(now); podman build -q -t localhost/tbst-derived -f /tmp/tbst-Containerfile /tmp >/dev/null; t1=$(now)
[ "$(podman run --rm localhost/tbst-derived cat /built)" = built ] && ok "podman build FROM busybox offline ($(dt $t0 $t1)s)" || bad "podman build"
if podman image exists $DEB; then
  [ "$(podman run --rm $DEB sh -c '. /etc/os-release; echo $VERSION_CODENAME')" = trixie ] && ok "debian:trixie glibc image runs" || bad "debian image"
  # The base packages the project's Containerfiles need (images/base-packages.txt).
  out=$(podman run --rm --network none $DEB sh -c 'python3 -m pytest --version 2>&1 && git --version && squid-openssl -v | head -1 && curl --version | head -1 | cut -d" " -f1-2') \
    && ok "debian image has pytest, git, squid-openssl, curl: $(echo "$out" | tr '\n' '|')" || bad "debian image base packages: $out"
else
  echo "SKIP: debian image (TB_DEBIAN_IMAGE=0)"
fi
# -- 3. networks: internal vs external vs none, and the outside-world hosts
probe='wget -T 3 -qO- http://10.78.0.1:8080/ >/dev/null 2>&1 && echo REACHED || echo BLOCKED'
podman network create --internal st-int >/dev/null; podman network create st-ext >/dev/null
[ "$(podman run --rm --network st-int $IMG sh -c "$probe")" = BLOCKED ] && ok "internal network cannot reach outside" || bad "internal reached outside"
[ "$(podman run --rm --network st-int --network st-ext $IMG sh -c "$probe")" = REACHED ] && ok "container on internal+external reaches outside" || bad "dual-homed blocked"
[ "$(podman run --rm --network none $IMG sh -c "$probe")" = BLOCKED ] && ok "--network none blocked" || bad "none reached outside"
out=$(podman run --rm --network st-ext $IMG sh -c 'wget -T 3 -qO- http://allowed.example/; wget -T 3 -qO- http://allowed.example:8080/; wget -T 3 -qO- http://denied.example/; wget -T 3 -qO- http://private.example:8080/' 2>&1 | tr '\n' ' ')
[ "$out" = "hello-from-allowed.example hello-from-allowed.example hello-from-denied.example hello-from-outside " ] \
  && ok "outside hosts by name from a container (allowed.example:80/8080, denied.example, private.example:8080)" || bad "outside hosts: $out"
tls=$(podman run --rm --network pasta -v /srv/testbed-ca.pem:/ca.pem:ro $DEB sh -c \
  'curl -s -m 5 --cacert /ca.pem https://allowed.example/; echo; curl -s -m 5 --cacert /ca.pem https://api.example/v1/x; echo; python3 -c "import socket; s=socket.create_connection((\"allowed.example\", 443), 5); s.sendall(b\"SSH-2.0-x\\r\\n\"); print(s.recv(64).decode())"' 2>&1 | tr '\n' ' ')
case "$tls" in
  *hello-from-allowed.example-tls*stand_in*api.example*SSH-2.0-testbed-outside*) ok "outside TLS hosts (allowed.example:443, api.example:443 with the test CA; non-TLS gets the banner)" ;;
  *) bad "outside TLS hosts: $tls" ;;
esac
line=$(podman run --rm --network pasta $DEB python3 -c 'import socket; s=socket.create_connection(("allowed.example", 2525), 5); s.sendall(b"junk\r\nPING\r\n"); import time; time.sleep(0.3); print(s.recv(64).decode().split())' 2>&1)
[ "$line" = "['-ERR', 'unknown', 'command', '+PONG']" ] && ok "the line service (allowed.example:2525) answers junk and PING" || bad "line service: $line"
podman network rm -f st-int st-ext >/dev/null
# -- 4. quadlet: .network(Internal) .network .volume .pod .container x3 + template service + timer
mkdir -p $Q $U
printf '[Network]\nNetworkName=tbst-int\nInternal=true\n' >$Q/tbst-int.network
printf '[Network]\nNetworkName=tbst-ext\n' >$Q/tbst-ext.network
printf '[Volume]\nVolumeName=tbst-data\n' >$Q/tbst-data.volume
printf '[Pod]\nPodName=tbst\nNetwork=tbst-int.network\n' >$Q/tbst.pod
cat >$Q/tbst-agent.container <<'EOF'
[Container]
ContainerName=tbst-agent
Image=localhost/tb-busybox:latest
Pod=tbst.pod
Volume=tbst-data.volume:/data
# catatonit as PID 1: a bare `sleep` as PID 1 ignores SIGTERM -> 10 s stop timeout
RunInit=true
Exec=sh -c 'echo agent-up > /data/hello; exec sleep 100000'
EOF
cat >$Q/tbst-proxy.container <<'EOF'
[Container]
ContainerName=tbst-proxy
Image=localhost/tb-busybox:latest
Network=tbst-int.network
Network=tbst-ext.network
RunInit=true
Exec=sh -c 'mkdir -p /w && echo proxy-ok > /w/index.html && exec httpd -f -p 8081 -h /w'
EOF
cat >$Q/tbst-gate.container <<'EOF'
[Container]
ContainerName=tbst-gate
Image=localhost/tb-busybox:latest
Network=none
RunInit=true
Exec=sleep 100000
EOF
cat >$U/tbst-run@.service <<'EOF'
[Unit]
Description=testbed selftest run %i
[Service]
Type=oneshot
ExecStart=/usr/bin/podman run --rm --name tbst-run-%i --network none localhost/tb-busybox:latest echo run-%i-ok
EOF
printf '[Timer]\nOnActiveSec=0.3s\nAccuracySec=50ms\n' >$U/tbst-run@.timer
/usr/libexec/podman/quadlet -dryrun -user >/dev/null 2>&1 && ok "quadlet -dryrun -user accepts the files" || bad "quadlet dryrun"
t0=$(now); busctl --user call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager Reload >/dev/null; t1=$(now)
echo "TIME daemon-reload via D-Bus (runs the quadlet generator): $(dt $t0 $t1)s"
for u in tbst-int-network tbst-ext-network tbst-data-volume tbst-pod tbst-agent tbst-proxy tbst-gate; do
  [ "$(systemctl --user show -P LoadState $u.service)" = loaded ] || bad "$u.service not generated"; done
ok "quadlet units generated"
waitrun() { local n=0; until [ "$(podman container inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" = true ]; do
  [ "$(systemctl --user show -P ActiveState "$1.service")" != failed ] || { bad "$1.service failed"; journalctl --user -q -o cat -n 5 -u "$1.service"; return 0; }
  sleep 0.01; n=$((n+1)); [ $n -lt 6000 ] || { bad "$1 not running after 60 s"; return 0; }; done; }
startunit() { busctl --user call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager StartUnit ss "$1" replace >/dev/null; }
t0=$(now); startunit tbst-proxy.service; waitrun tbst-proxy; t1=$(now); echo "TIME StartUnit -> running, tbst-proxy (creates 2 networks): $(dt $t0 $t1)s"
t0=$(now); startunit tbst-agent.service; waitrun tbst-agent; t1=$(now); echo "TIME StartUnit -> running, tbst-agent (creates volume + pod): $(dt $t0 $t1)s"
t0=$(now); systemctl --user start tbst-gate.service; waitrun tbst-gate; t1=$(now); echo "TIME systemctl --user start -> running, tbst-gate (network none): $(dt $t0 $t1)s"
for u in tbst-proxy tbst-agent tbst-gate tbst-pod; do n=0
  until [ "$(systemctl --user show -P ActiveState $u.service)" = active ]; do sleep 0.05; n=$((n+1)); [ $n -lt 600 ] || break; done; done
states=$(systemctl --user is-active tbst-proxy tbst-agent tbst-gate tbst-pod | tr '\n' ' ' || true)
[ "$states" = "active active active active " ] && ok "quadlet services active" || bad "quadlet services: $states"
probe_allowed='wget -T 3 -qO- http://allowed.example/ >/dev/null 2>&1 && echo REACHED || echo BLOCKED'
[ "$(podman exec tbst-agent wget -T 3 -qO- http://tbst-proxy:8081/)" = proxy-ok ] && ok "agent (pod, internal) -> proxy by DNS name" || bad "agent->proxy"
[ "$(podman exec tbst-agent sh -c "$probe_allowed")" = BLOCKED ] && ok "agent cannot reach outside (allowed.example)" || bad "agent reached outside"
[ "$(podman exec tbst-proxy sh -c "$probe_allowed")" = REACHED ] && ok "proxy reaches outside (allowed.example)" || bad "proxy blocked"
[ "$(podman exec tbst-gate sh -c 'ip -o link | wc -l')" = 1 ] && ok "gate has only lo" || bad "gate has interfaces"
[ "$(podman exec tbst-agent cat /data/hello)" = agent-up ] && ok "quadlet volume mounted" || bad "volume"
t0=$(now); systemctl --user start tbst-run@one.service; t1=$(now)   # blocks until the oneshot finished
echo "TIME systemctl start tbst-run@one (oneshot podman run --rm): $(dt $t0 $t1)s"
startunit tbst-run@two.service   # same template over D-Bus
systemctl --user start tbst-run@t3.timer   # template timer -> instance t3
for u in one two t3; do n=0
  until journalctl --user -q -o cat -u tbst-run@$u.service | grep -q "run-$u-ok"; do
    sleep 0.1; n=$((n+1)); [ $n -lt 100 ] || break; done
  journalctl --user -q -o cat -u tbst-run@$u.service | grep -q "run-$u-ok" && ok "tbst-run@$u.service ran" || bad "tbst-run@$u"; done
t0=$(now); teardown; t1=$(now); echo "TIME teardown (stop 4 services + pod, rm networks/volume): $(dt $t0 $t1)s"
[ $FAILED = 0 ] && echo "SELFTEST OK" || { echo "SELFTEST FAILED"; exit 1; }
EOS
}

cmd=${1:-up}; [ $# -gt 0 ] && shift
case "$cmd" in
  up)       take_lock; host_deps; build_all; fetch_agent_packages; boot; import_images
            log "ready: '$SELF user CMD' runs CMD as $TB_USER; /src = $PROJECT_ROOT" ;;
  user)     [ $# -gt 0 ] || die "usage: $0 user CMD..."; this_checkout; in_user "$@" ;;
  root)     [ $# -gt 0 ] || die "usage: $0 root CMD..."; this_checkout; in_root_unit "$@" ;;
  nsenter)  [ $# -gt 0 ] || die "usage: $0 nsenter CMD..."; this_checkout; in_root "$@" ;;
  selftest) [ "$TB_SUITE" = trixie ] || die "selftest proves the trixie stack (Quadlet, pasta); the bookworm flavour is proven by 'cargo test --test bookworm'"
            selftest ;;
  status)   if running; then echo "running nspawn=$(nspawn_pid) leader=$(leader_pid) state=$(in_root systemctl is-system-running || true) $(cat "$BINDS_FILE" 2>/dev/null || true)"
            else echo stopped; fi ;;
  down)     take_lock; down ;;
  purge)    take_lock; down; rm -rf "$TB_DIR"; log "removed $TB_DIR" ;;
  *)        die "unknown command $cmd (up|down|status|user|root|nsenter|selftest|purge)" ;;
esac
