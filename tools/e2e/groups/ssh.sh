# The VM run's ssh group: OpenSSH with FIDO keys. Sourced by inside-vm.sh; e2e_ssh runs it in the current round.

e2e_ssh() {
# --- OpenSSH: FIDO keys, signatures verified by ssh-keygen ---------------------------------------
# After the second lane: ssh-keygen's middleware sends requests to every FIDO device it finds.
if want ssh; then
group
gate start-key-ssh start_key e2e-ssh --name ssh
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
step ssh-keygen-ecdsa-sk ssh-keygen -t ecdsa-sk -f id_ecdsa_sk -N "" -C e2e
step ssh-sign-verify-ecdsa-sk ssh_sign_verify id_ecdsa_sk
step ssh-keygen-ed25519-sk ssh-keygen -t ed25519-sk -f id_ed25519_sk -N "" -C e2e
step ssh-sign-verify-ed25519-sk ssh_sign_verify id_ed25519_sk
step ssh-ensure-pin ensure_pin
step ssh-keygen-resident pin ssh-keygen -t ecdsa-sk -O resident -O application=ssh:e2e -f id_rk -N "" -C e2e
step ssh-sign-verify-resident ssh_sign_verify id_rk
step ssh-keygen-download-resident download_resident
cleanup stop-key-ssh stop_key
fi
}
