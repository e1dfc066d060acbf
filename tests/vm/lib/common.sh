# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that run.sh and the other libs read
# Shared helpers for tests/vm/run.sh: logging, failure lines, host tool checks.
# Progress goes to stderr with a "[vm]" prefix; stdout carries only test output and
# go-test-style result lines, so internal/cmd/testsummary can count them.

T0=$EPOCHREALTIME

log() { printf '[vm] %s\n' "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }

# elapsed START -> seconds since START (an $EPOCHREALTIME value), one decimal.
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }

# result STATUS NAME [DETAIL]: one go-test-style result line on stdout.
result() { printf -- '--- %s: %s%s\n' "$1" "$2" "${3:+ ($3)}"; }

# require_host_tools: the harness runs standalone too, so say exactly what is missing
# (scripts/deps.sh installs all of these for `make`).
require_host_tools() {
  local missing=() pair
  for pair in qemu-system-x86_64:qemu-system-x86 xz:xz-utils zstd:zstd cpio:cpio \
              dpkg-deb:dpkg apt-get:apt apt-cache:apt flock:util-linux awk:mawk \
              timeout:coreutils; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  ((${#missing[@]} == 0)) || die "missing host tools; install them with: apt-get install ${missing[*]}"
  [[ $(uname -m) == x86_64 ]] || die "an x86_64 host is required"
}

# host_mirror: the Debian mirror the host's apt sources already use (never security),
# or a stop that says how to name one. Its reader lives in mirror.sh, sourced here so
# that every script that sources common.sh (tests/usb4 too) has it.
# shellcheck source=/dev/null
. "$(dirname "${BASH_SOURCE[0]}")/mirror.sh"
host_mirror() {
  apt_mirror "${APT_DIR:-/etc/apt}" ||
    die "no Debian mirror in the apt sources under ${APT_DIR:-/etc/apt} (sources.list, sources.list.d/*.list or *.sources); set MIRROR=<URL of a Debian mirror>"
}
