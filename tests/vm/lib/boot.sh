# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that run.sh and the other libs read
# Boots the image under qemu and turns the serial console into results: "@@VM" marker
# lines from the guest's /init drive a small state machine, test output between
# BEGIN and END goes to stdout unchanged, and everything goes to the serial log.

# vm_boot: sets FAILURES (the number of harness-level FAIL lines printed).
vm_boot() {
  # TCG only: this host's /dev/kvm is PVM-only and a stock guest kernel hangs on it.
  # idle=halt: an MWAIT-idle vCPU under TCG wakes only on its next tick (4 ms at HZ=250),
  # which made every cross-vCPU wakeup cost ~4 ms; a HLT-idle one wakes on the IPI.
  local append="console=ttyS0,115200 panic=-1 loglevel=4 idle=halt $VM_APPEND"
  # shellcheck disable=SC2054 # the commas belong to qemu's option values
  local qemu=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "$VM_SMP" -m "$VM_MEM"
              -nodefaults -no-user-config -nographic -serial stdio -monitor none -no-reboot
              -kernel "$KIMG" -initrd "$INITRD" -append "$append")
  # VM_QEMU_EXTRA: more qemu arguments, words (the usb4 bed's topologies add PCI functions).
  # shellcheck disable=SC2206 # split on purpose
  [[ -n ${VM_QEMU_EXTRA:-} ]] && qemu+=($VM_QEMU_EXTRA)
  log "boot: ${qemu[*]}"
  log "serial log: $SERIAL_LOG"
  : > "$SERIAL_LOG"
  ln -sfn "${SERIAL_LOG##*/}" "$BUILDDIR/serial-latest.log"

  # A guest kernel that dies before /init ran nothing of ours: under TCG the 7.2 kernel
  # was seen to oops in its own early timers (int3 in enqueue_timer at 1.7 s; one of the
  # 68 serial logs kept here on 2026-12-02). That boot is reported as a SKIP line with the kernel's words and booted
  # once more; a second death is the FAIL below.
  local try tb qpid qrc
  for try in 1 2; do
    # Relay state, set by vm_relay and read back below.
    REACHED_INIT=0 SETUP="" DONE=0 CURRENT="" FAILURES=0 KERNEL_TROUBLE=""
    declare -gA RESULT_RC=()
    tb=$EPOCHREALTIME qrc=0
    # The console comes through a FIFO so the relay runs in this shell (its state is read
    # below) and qemu's pid is known: if the harness is interrupted, qemu goes too.
    # qemu's own messages go to stderr, so the console stream stays the guest's.
    local fifo="$WORK/console"
    rm -f "$fifo"; mkfifo "$fifo"
    timeout -k 5 "$VM_TIMEOUT" "${qemu[@]}" </dev/null >"$fifo" \
      2> >(sed -u 's/^/[vm] qemu: /' >&2) &
    qpid=$!
    trap 'kill "$qpid" 2>/dev/null; exit 130' INT TERM
    vm_relay "$tb" <"$fifo"
    wait "$qpid" || qrc=$?
    trap - INT TERM
    log "qemu exit $qrc after $(elapsed "$tb") s"
    if ((try == 1 && !REACHED_INIT)) && [[ -n $KERNEL_TROUBLE ]]; then
      result SKIP vm/boot_first "the guest kernel died before /init ($KERNEL_TROUBLE); booted once more"
      printf '[%s] qemu exit %s before /init; booting once more\n' "$(date +%T)" "$qrc" >> "$SERIAL_LOG"
      continue
    fi
    break
  done

  local why name notrun="not run"
  if ((qrc == 124 || qrc == 137)); then why="VM timed out after ${VM_TIMEOUT}s"
  elif [[ -n $KERNEL_TROUBLE ]]; then why="VM stopped, qemu exit $qrc; guest kernel: $KERNEL_TROUBLE"
  else why="VM stopped, qemu exit $qrc; kernel panic? see the serial log"; fi
  if ((!REACHED_INIT)); then
    fail_line vm/boot "kernel did not reach /init: $why"
  elif ((!DONE)); then
    fail_line vm/boot "/init did not finish: $why"
    [[ -n $SETUP ]] || fail_line vm/setup "no setup result"
    if [[ -n $CURRENT ]]; then
      fail_line "vm/$CURRENT" "no result: $why"
      RESULT_RC[$CURRENT]=none
    fi
  fi
  [[ $SETUP == fail ]] && notrun="not run: setup failed"
  for name in "${GUEST_NAMES[@]}"; do
    [[ -n ${RESULT_RC[$name]:-} ]] || fail_line "vm/$name" "$notrun"
  done
  printf '[%s] qemu exit %s; harness failures %s\n' "$(date +%T)" "$qrc" "$FAILURES" >> "$SERIAL_LOG"
}

fail_line() { result FAIL "$1" "$2"; FAILURES=$((FAILURES + 1)); }

# vm_relay T0: reads the serial console until qemu exits.
vm_relay() {
  local t0=${1/./} line now el rc pre passed=0
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line//$'\r'/}
    now=${EPOCHREALTIME/./}; el=$(((now - t0) / 100000))
    printf '[%4d.%d] %s\n' $((el / 10)) $((el % 10)) "$line" >> "$SERIAL_LOG"
    # The first sign of a dying guest kernel goes into the failure line itself: CI keeps
    # the result lines, not the serial log.
    case $line in
      *"Kernel panic"*)
        [[ $KERNEL_TROUBLE == *"Kernel panic"* ]] || KERNEL_TROUBLE+="${KERNEL_TROUBLE:+ ... }${line:0:160}" ;;
      *"BUG: "* | *"Out of memory"* | *"invoked oom-killer"*)
        [[ -n $KERNEL_TROUBLE ]] || KERNEL_TROUBLE=${line:0:160} ;;
    esac
    if [[ -n $CURRENT ]]; then
      if [[ $line == *"@@VM END "* ]]; then
        # Output that did not end in a newline shares its line with the marker.
        pre=${line%%@@VM END *}
        [[ -n $pre ]] && printf '%s\n' "$pre"
        [[ $pre == PASS ]] && passed=1
        rc=${line##*rc=}
        RESULT_RC[$CURRENT]=$rc
        log "$CURRENT: exit $rc"
        if [[ $rc != 0 ]]; then
          fail_line "vm/$CURRENT" "exit $rc"
        elif ((!passed)) && [[ $CURRENT == *.test ]]; then
          # A go test binary that exits 0 prints PASS last; anything else was cut short.
          fail_line "vm/$CURRENT" "exit 0 without a PASS line"
        fi
        CURRENT=""
      else
        printf '%s\n' "$line"
        [[ $line == PASS ]] && passed=1
      fi
      continue
    fi
    [[ $VM_VERBOSE == 1 ]] && printf '%s\n' "$line" >&2
    case $line in
      *"@@VM INIT "*) REACHED_INIT=1; log "reached /init after $((el / 10)).$((el % 10)) s: ${line#*@@VM INIT }" ;;
      *"@@VM STEP "*) log "guest: ${line#*@@VM STEP }" ;;
      *"@@VM SETUP OK"*)
        SETUP=ok; result PASS vm/setup
        log "setup ok: ${line#*@@VM SETUP OK }" ;;
      *"@@VM SETUP FAIL "*)
        SETUP=fail; fail_line vm/setup "${line#*@@VM SETUP FAIL }" ;;
      *"@@VM BEGIN "*)
        CURRENT=${line#*@@VM BEGIN }; passed=0
        log "running $CURRENT" ;;
      *"@@VM DONE"*) DONE=1 ;;
      *"Kernel panic"* | *"BUG: "* | *"Call Trace:"*) log "guest kernel: $line" ;;
    esac
  done
}
