#!/bin/sh
# Guest half of packaging/vmtest.sh (runs as root inside tests/vm's VM, busybox sh or
# dash): installs the usb4verbs .deb from /opt/usb4verbs with dpkg, checks what it put
# where, asks the stock ibv_devices/ibv_devinfo (librxe is not in the image, so only
# our provider can serve rxe0/rxe1), then purges the package. One go-test-style line
# per step: "--- PASS: pkg/<suite>/<step>". Exit status: install and remove only; the
# device steps depend on how far the provider is and are reported, not enforced.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
suite=${USB4VERBS_USERLAND:-unknown}
provdir=/usr/lib/x86_64-linux-gnu/libibverbs
driver=/etc/libibverbs.d/usb4_rdma.driver
hard=0
# Full paths: busybox sh runs its own applets ahead of PATH, and sid's busybox has a
# (much smaller) dpkg applet.
DPKG=/usr/bin/dpkg DPKG_QUERY=/usr/bin/dpkg-query
export DPKG_COLORS=never

pass() { echo "--- PASS: pkg/$suite/$1"; }
# fail STEP DETAIL [soft]: a FAIL line; install/remove failures also fail the script.
fail() { echo "--- FAIL: pkg/$suite/$1 ($2)"; [ "${3:-}" = soft ] || hard=1; }
section() { echo "=== $*"; }

# shellcheck disable=SC2012 # our own file names, no odd characters
deb=$(ls /opt/usb4verbs/usb4verbs_*.deb 2>/dev/null | head -n1)
[ -n "$deb" ] || { fail install "no usb4verbs_*.deb in /opt/usb4verbs"; exit 1; }

# The image is extracted debs without dpkg's database. Record, from the files that are
# really there, the two packages our Depends names, so dpkg checks them for real.
libc=$(ls /usr/lib/x86_64-linux-gnu/libc.so.6 2>/dev/null)
libc_ver=$("$libc" 2>/dev/null | sed -n '1s/.*(\(Debian\|Ubuntu\) GLIBC \([^)]*\)).*/\2/p')
ibv_real=$(readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1 2>/dev/null)
ibv_ver=$(echo "${ibv_real##*/}" | sed -n 's/^libibverbs\.so\.1\.[0-9]*\.\([0-9]*\.[0-9]*\)$/\1/p')
section "userland $suite: glibc ${libc_ver:-?}, libibverbs ${ibv_real##*/} (rdma-core ${ibv_ver:-?})"
if [ -z "$libc_ver" ] || [ -z "$ibv_ver" ]; then fail install "cannot tell the libc6/libibverbs1 versions in the image"; exit 1; fi
mkdir -p /var/lib/dpkg/info /var/lib/dpkg/updates /var/lib/dpkg/triggers /var/lib/dpkg/alternatives /var/log
touch /var/lib/dpkg/info/libc6:amd64.list /var/lib/dpkg/info/libibverbs1:amd64.list
: > /var/lib/dpkg/available
for p in "libc6 $libc_ver" "libibverbs1 $ibv_ver"; do
  # shellcheck disable=SC2086 # "name version" split into two words on purpose
  set -- $p
  printf 'Package: %s\nStatus: install ok installed\nPriority: optional\nArchitecture: amd64\nMulti-Arch: same\nMaintainer: seeded by packaging/vm/guest.sh\nVersion: %s\nDescription: seeded from the extracted image\n\n' "$1" "$2"
done > /var/lib/dpkg/status

# --- install
section "dpkg -i ${deb##*/}"
why=""
if $DPKG -i "$deb"; then
  # shellcheck disable=SC2016 # ${Status} is dpkg-query's format, not the shell's
  st=$($DPKG_QUERY -W -f '${Status} ${Version}' usb4verbs 2>&1)
  echo "dpkg-query: $st"
  case $st in "install ok installed "*) ;; *) why="dpkg-query says: $st" ;; esac
else
  why="dpkg -i exit $?"
fi
ls -l "$provdir"/libusb4_rdma* "$driver" /usr/bin/ibvinfo
# The front under every PABI name, each a file (not a symlink), all the same bytes.
bad=""
for n in 34 57 59 64 65; do
  l=$provdir/libusb4_rdma-rdmav$n.so
  [ -f "$l" ] && [ ! -L "$l" ] && cmp -s "$l" "$provdir/libusb4_rdma-rdmav34.so" || bad="$bad rdmav$n"
done
# The Go part, which the front loads from its own directory at the first open.
[ -f "$provdir/libusb4_rdma-go.so" ] && [ ! -L "$provdir/libusb4_rdma-go.so" ] || bad="$bad go-part"
[ "$(cat "$driver" 2>/dev/null)" = "driver usb4_rdma" ] || bad="$bad driver-file"
[ -x /usr/bin/ibvinfo ] || bad="$bad ibvinfo"
[ -z "$bad" ] || why="${why:+$why; }wrong or missing:$bad"
if [ -z "$why" ]; then pass install; else fail install "$why"; fi

# --- devices through stock libibverbs (librxe excluded from the image)
ls "$provdir"/librxe* 2>/dev/null && fail devices "librxe is in the image; the check would prove nothing" soft
export USB4VERBS_CLAIM_RXE=1 IBV_SHOW_WARNINGS=1
section "ibv_devices"
out=$(USB4VERBS_DEBUG=1 ibv_devices 2>&1); rc=$?
echo "$out"
# Our provider says what it probed (USB4VERBS_DEBUG); each device row is "name GUID".
listed() { echo "$out" | grep -Eq "^[[:space:]]+$1[[:space:]]+[0-9a-f]{16}\$"; }
if [ $rc = 0 ] && echo "$out" | grep -q '^libusb4_rdma: libibverbs PABI' && listed rxe0 && listed rxe1; then
  pass devices
else
  fail devices "ibv_devices exit $rc; want our provider's probe line and rxe0 and rxe1 listed" soft
fi
section "ibv_devinfo -v"
out=$(timeout 60 ibv_devinfo -v 2>&1); rc=$?
echo "$out"
if [ $rc = 0 ] && echo "$out" | grep -q 'hca_id:[[:space:]]*rxe0' && echo "$out" | grep -q 'hca_id:[[:space:]]*rxe1' \
   && echo "$out" | grep -q PORT_ACTIVE; then
  pass devinfo
else
  fail devinfo "ibv_devinfo exit $rc, or rxe0/rxe1 with an active port missing" soft
fi
section "ibvinfo"
timeout 60 /usr/bin/ibvinfo --no-color; rc=$?
if [ $rc = 0 ]; then pass ibvinfo; else fail ibvinfo "ibvinfo exit $rc" soft; fi
unset USB4VERBS_CLAIM_RXE IBV_SHOW_WARNINGS

# --- remove and purge: nothing of ours may stay behind
section "dpkg -P usb4verbs"
why=""
$DPKG -P usb4verbs || why="dpkg -P exit $?"
left=$(ls -d "$provdir"/libusb4_rdma* "$driver" /usr/bin/ibvinfo /usr/share/doc/usb4verbs 2>/dev/null)
# shellcheck disable=SC2086 # one word per path
[ -z "$left" ] || why="${why:+$why; }left behind: $(printf '%s ' $left)"
if [ -z "$why" ]; then pass remove; else fail remove "$why"; fi
exit $hard
