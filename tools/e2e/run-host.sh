#!/usr/bin/env bash
# The host run: the clients the VM used to drive over a uhid node (libfido2's tools, OpenSSH and sshd, PAM,
# python-fido2's hidraw backend and device suite, conform and bench over hidapi, profile capture, Chromium with its
# sandbox, Firefox), each against a private hidraw key (serve --transport private; host-lib.sh), as the user who
# runs this script (make host-e2e makes it an unprivileged one). The groups are the VM's (tools/e2e/groups).
#   run-host.sh BIN RESULTS REPO        HOST_GROUPS (default all), E2E_REPEAT, PYTHON
# The whole script is one { ... } block, read before it runs (see inside-vm.sh).
{
set -u
bin=$1
out=$2
repo=$3
results=$out
python=${PYTHON:-python3}
pin() { "$python" "$repo/tools/e2e/answer_pin.py" 1234 "$@"; } # runs a command, typing PIN 1234 at its prompts
groups=${HOST_GROUPS:-libfido2,ssh,python,conform,browser,pam,capture,deployed}
want() { [[ ",$groups," == *",$1,"* ]]; }
rounds=${E2E_REPEAT:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "E2E_REPEAT must be a positive number, not '$rounds'"; rounds=1; }
source "$repo/tools/e2e/steps.sh"
source "$repo/tools/e2e/vm-lib.sh"
source "$repo/tools/e2e/host-lib.sh"
for group_file in "$repo"/tools/e2e/groups/*.sh; do source "$group_file"; done
copy_pid=

# Each key is private to the programs given its environment, so the lanes need not keep OpenSSH and the browsers
# (which talk to every key they find) apart from the other groups' keys, as the VM must.
run_round() {
    { want python || want conform; } && run_lane second second_lane
    e2e_libfido2
    e2e_ssh
    e2e_pam
    e2e_deployed
    e2e_capture
    e2e_browser
    join_lane second
}

run_rounds stop_key
finish
exit
}
