# shellcheck shell=sh
# tests/usb4/guest-listen.sh: waiting for a TCP server in the bed's guest, sourced by
# guest-smoke.sh, guest-srq.sh and guest-ring.sh from /opt/usb4verbs (tests/usb4/run.sh
# installs it beside them).

# listening PORT: something listens on TCP PORT (IPv4 or IPv6).
listening() {
  hex=$(printf ':%04X' "$1")
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null \
    | awk -v p="$hex" 'substr($2, length($2) - 4) == p && $4 == "0A" { f = 1 } END { exit !f }'
}

# wait_listen PID PORT: until the server PID listens on TCP PORT, at most 30 s; 1 if it
# exited first or never listened. A fixed `sleep 1` lost the race on a loaded host: the
# client found nothing on the port and the server then waited out its timeout.
wait_listen() {
  n=0
  while [ $n -lt 300 ]; do
    listening "$2" && return 0
    kill -0 "$1" 2>/dev/null || return 1
    usleep 100000
    n=$((n + 1))
  done
  return 1
}
