# shellcheck shell=sh
# tests/usb4/guest-listen.sh: waiting for a TCP server in the bed's guest, and a
# server/client pair, sourced by guest-smoke.sh, guest-srq.sh, guest-ring.sh and
# guest-ucx.sh from /opt/usb4verbs (tests/usb4/run.sh installs it beside them).

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

# serve NAME PORT SECS SRVCMD -- CLICMD: the server on CPU 0, once it listens on PORT the
# client on CPU 1, each under `timeout SECS` (no argument has a space); output in
# /tmp/NAME.{srv,cli}; rc of the client (or the server's when the client passed), 99 when
# the server never listened.
serve() {
  name=$1 port=$2 secs=$3
  shift 3
  srv='' cli='' side=srv
  for w in "$@"; do
    if [ "$w" = -- ]; then side=cli; continue; fi
    if [ $side = srv ]; then srv="$srv $w"; else cli="$cli $w"; fi
  done
  # shellcheck disable=SC2086 # word lists
  taskset 1 timeout "$secs" $srv > "/tmp/$name.srv" 2>&1 &
  sp=$!
  if ! wait_listen $sp "$port"; then
    wait $sp
    echo "server exited before it listened (rc $?)" > "/tmp/$name.cli"
    return 99
  fi
  # shellcheck disable=SC2086
  taskset 2 timeout "$secs" $cli > "/tmp/$name.cli" 2>&1
  crc=$?
  wait $sp
  src=$?
  [ $crc = 0 ] && [ $src != 0 ] && crc=$src
  return $crc
}
