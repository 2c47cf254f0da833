#!/usr/bin/env bash
# make host-e2e: the host run (run-host.sh) as an unprivileged user, on this machine, with no uhid, no VM and no
# root for the clients. As root it makes the user fidosim-e2e (a login shell and a home, which sshd and pam_u2f need)
# and the PAM services fidosim-e2e and fidosim-e2e-pin, and stages the binary, the scripts and a Python library where that user reads
# them; as another user it runs as that user (the PAM group then needs /etc/pam.d/fidosim-e2e from a root run).
#   tools/e2e/host-e2e.sh BIN          HOST_GROUPS, E2E_REPEAT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$1
stage=$(mktemp -d /tmp/fidosim-host-e2e.XXXXXX)
chmod 0755 "$stage"
mkdir -p "$stage/repo/.build" "$stage/results"
cp "$bin" "$stage/fidosim"
cp -r "$repo/tools" "$stage/repo/tools"
cp "$repo/pyproject.toml" "$stage/repo/pyproject.toml"  # the interop suite's pytest settings (its markers)
# Debian's python3 with the clients' Python packages, readable by every user (the project's venv may live under a
# home directory only its owner enters).
pylib=$repo/.build/other-user-python
bash "$here/other-user-python.sh" "$pylib" "$repo"
cp -r "$pylib" "$stage/pylib"
[ -d "$repo/.build/device-suite" ] && cp -r "$repo/.build/device-suite" "$stage/repo/.build/device-suite"
run=()
if [ "$(id -u)" = 0 ]; then
    user=fidosim-e2e
    id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
    printf '%s\n' "# fidosim's host run (make host-e2e): pam_u2f alone decides." \
        "auth required pam_u2f.so origin=pam://fidosim-e2e appid=pam://fidosim-e2e" \
        "account required pam_permit.so" >/etc/pam.d/fidosim-e2e
    printf '%s\n' "# fidosim's host run (make host-e2e): pam_u2f with the PIN at every login." \
        "auth required pam_u2f.so origin=pam://fidosim-e2e appid=pam://fidosim-e2e pinverification=1" \
        "account required pam_permit.so" >/etc/pam.d/fidosim-e2e-pin
    chown -R "$user" "$stage/results" "$stage/repo/.build"
    run=(runuser -u "$user" --)
fi
start=$(date +%s)
set +e
"${run[@]}" env -i PATH=/usr/local/bin:/usr/bin:/bin TMPDIR=/tmp LANG=C.UTF-8 PYTHON=/usr/bin/python3 \
    PYTHONPATH="$stage/pylib" HOST_GROUPS="${HOST_GROUPS:-libfido2,ssh,python,conform,browser,pam,capture,deployed}" \
    E2E_REPEAT="${E2E_REPEAT:-1}" DEVICE_SUITE_CACHE="$stage/repo/.build/device-suite" \
    bash "$stage/repo/tools/e2e/run-host.sh" "$stage/fidosim" "$stage/results" "$stage/repo"
set -e
echo "host-e2e: $(( $(date +%s) - start )) s as $( [ ${#run[@]} -gt 0 ] && echo fidosim-e2e || id -un); results in $stage/results"
[ -f "$stage/results/summary" ] || { echo "host-e2e: no summary: the run did not complete"; exit 1; }
grep -q "^e2e: [0-9]* passed, 0 failed" "$stage/results/summary"
