# The VM run's ssh group: OpenSSH with FIDO keys. Sourced by inside-vm.sh; e2e_ssh runs it in the current round.

# OpenSSH with the key (the deployed group uses these too).
ssh_sign_verify() { # $1 key file
    echo "a message for $1" >"$1.msg"
    ssh-keygen -Y sign -f "$1" -n file "$1.msg" &&
        echo "alice@fidosim $(cut -d' ' -f1,2 "$1.pub")" >"$1.allowed" &&
        ssh-keygen -Y verify -f "$1.allowed" -I alice@fidosim -n file -s "$1.msg.sig" <"$1.msg"
}
ensure_pin() { fido2-token -I "$DEV" | grep -qw clientPin || pin fido2-token -S "$DEV"; }
download_resident() { # ssh-keygen -K writes the resident key's handle files; the public key must match
    mkdir -p rk && cd rk || return 1
    pin ssh-keygen -K -N "" || return 1
    ls -l
    local got
    got=$(cut -d' ' -f2 id_ecdsa_sk_rk_e2e.pub)
    cd .. && [ "$got" = "$(cut -d' ' -f2 id_rk.pub)" ]
}
ssh_login() { # a login to a real sshd on loopback with the FIDO key file $1 (sshd runs as this user on a free port)
    local key=$1 dir=$HOME/sshd port sshd rc=0
    rm -rf "$dir" && mkdir -p "$dir" && ssh-keygen -q -t ed25519 -N "" -f "$dir/host_key" </dev/null || return 1
    cp "$key.pub" "$dir/authorized_keys"
    port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    printf '%s\n' "Port $port" "ListenAddress 127.0.0.1" "HostKey $dir/host_key" \
        "AuthorizedKeysFile $dir/authorized_keys" "PubkeyAuthentication yes" "PasswordAuthentication no" \
        "KbdInteractiveAuthentication no" "UsePAM no" "PidFile $dir/sshd.pid" "StrictModes no" >"$dir/sshd_config"
    # The server needs no key: it runs outside the key's tree.
    env -u LD_PRELOAD -u UMOCKDEV_DIR /usr/sbin/sshd -D -e -f "$dir/sshd_config" 2>"$dir/sshd.log" &
    sshd=$!
    wait_for 10 "sshd to listen" grep -q "Server listening" "$dir/sshd.log" || { kill $sshd; return 1; }
    ssh -p "$port" -i "$key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \
        -o IdentitiesOnly=yes "$(id -un)@127.0.0.1" echo logged in with the FIDO key </dev/null || rc=1
    kill $sshd; wait $sshd
    cat "$dir/sshd.log"
    [ $rc = 0 ] && grep -q "Accepted publickey for $(id -un) from 127.0.0.1 .* ECDSA-SK" "$dir/sshd.log"
}

e2e_ssh() {
# --- OpenSSH: FIDO keys, signatures verified by ssh-keygen ---------------------------------------
# After the second lane: ssh-keygen's middleware sends requests to every FIDO device it finds.
if want ssh; then
group
gate start-key-ssh start_key e2e-ssh --name ssh
step ssh-keygen-ecdsa-sk ssh-keygen -t ecdsa-sk -f id_ecdsa_sk -N "" -C e2e
step ssh-sign-verify-ecdsa-sk ssh_sign_verify id_ecdsa_sk
if [ "$smoke" = 0 ]; then
step ssh-keygen-ed25519-sk ssh-keygen -t ed25519-sk -f id_ed25519_sk -N "" -C e2e
step ssh-sign-verify-ed25519-sk ssh_sign_verify id_ed25519_sk
step ssh-ensure-pin ensure_pin
step ssh-keygen-resident pin ssh-keygen -t ecdsa-sk -O resident -O application=ssh:e2e -f id_rk -N "" -C e2e
step ssh-sign-verify-resident ssh_sign_verify id_rk
step ssh-keygen-download-resident download_resident
[ "$key_transport" = private ] && step ssh-login-sshd ssh_login id_ecdsa_sk
fi
cleanup stop-key-ssh stop_key
fi
}
