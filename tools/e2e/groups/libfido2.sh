# The VM run's first group: the uhid device and libfido2's tools against it. Sourced by inside-vm.sh;
# e2e_libfido2 runs it in the current round.

# libfido2's tools on the key $DEV (the deployed group uses them too).
cdh() { head -c 32 /dev/urandom | base64; }
make_cred() { # $1 name, extra args for fido2-cred -M; $wrap runs fido2-cred -M (pin: answering the PIN prompt)
    local name=$1; shift
    printf '%s\n%s\n%s\n%s\n' "$(cdh)" "example.com" "alice" "$(head -c 16 /dev/urandom | base64)" >"$name.in"
    local verify_args=()
    [[ " $* " == *" -h "* ]] && verify_args=(-h)
    ${wrap:-} fido2-cred -M "$@" -i "$name.in" -o "$name.cred" "$DEV" es256 &&
        fido2-cred -V "${verify_args[@]}" -i "$name.cred" -o "$name.pub" es256
}
assert_cred() { # $1 name; verifies an assertion with the credential's id against its public key
    local name=$1
    local id
    id=$(sed -n 5p "$name.cred")
    printf '%s\n%s\n%s\n' "$(cdh)" "example.com" "$id" >"$name.ain"
    fido2-assert -G -i "$name.ain" -o "$name.assert" "$DEV" &&
        fido2-assert -V -i "$name.assert" "$name.pub" es256
}
assert_discoverable() { # no allow list: the key picks the discoverable credential
    printf '%s\n%s\n' "$(cdh)" "example.com" >rk.ain
    fido2-assert -G -r -i rk.ain -o rk.assert "$DEV" &&
        fido2-assert -V -i rk.assert rk.pub es256
}
assert_hmac() { # two assertions with the same salt give the same hmac-secret output
    local id salt
    id=$(sed -n 5p pinrk.cred)
    salt=$(head -c 32 /dev/urandom | base64)
    for n in 1 2; do
        printf '%s\n%s\n%s\n%s\n' "$(cdh)" "example.com" "$id" "$salt" >"hmac$n.ain"
        fido2-assert -G -h -i "hmac$n.ain" -o "hmac$n.assert" "$DEV" || return 1
        fido2-assert -V -h -i "hmac$n.assert" pinrk.pub es256 || return 1
    done
    local a b
    a=$(tail -n 1 hmac1.assert)
    b=$(tail -n 1 hmac2.assert)
    echo "hmac-secret outputs: $a / $b"
    [ -n "$a" ] && [ "$a" = "$b" ]
}
list_rps() { pin fido2-token -L -r "$DEV" | tee /dev/stderr | grep -q "example.com"; }
list_creds() { # the discoverable credential made with the PIN is listed under example.com
    pin fido2-token -L -k example.com "$DEV" | tee /dev/stderr | grep -qF "$(sed -n 5p pinrk.cred)"
}
delete_cred() { # after deleting it, the key no longer lists it and no longer signs with it
    local id
    id=$(sed -n 5p pinrk.cred)
    pin fido2-token -D -i "$id" "$DEV" || return 1
    if pin fido2-token -L -k example.com "$DEV" | grep -qF "$id"; then echo "still listed"; return 1; fi
    if assert_cred pinrk; then echo "still signs"; return 1; fi
    return 0
}

e2e_libfido2() {
# --- the device ---------------------------------------------------------------------------------
group
gate start-key start_key e2e-libfido2 --name libfido2
if [ "$key_transport" = uhid ]; then
step auto-transport-picks-uhid grep -q "using uhid" "$out/serve-e2e-libfido2.log"
step approve-on-uhid-warns grep -q "warning: presence approve after 0.2 seconds on uhid: any local program" \
    "$out/serve-e2e-libfido2.log"
fi
step fido2-token-list bash -c "fido2-token -L | tee /dev/stderr | grep -q '$DEV: vendor=0x1209, product=0xf1d0'"
step fido2-token-info bash -c "fido2-token -I $DEV | tee /dev/stderr | grep -q 'version strings: U2F_V2, FIDO_2_0, FIDO_2_1_PRE, FIDO_2_1'"

# --- libfido2 tools: make and verify credentials, assertions ----------------------------------
if want libfido2; then
step fido2-cred-make-verify make_cred plain
step fido2-assert-get-verify assert_cred plain
if [ "$smoke" = 0 ]; then
step fido2-cred-discoverable make_cred rk -r
step fido2-assert-discoverable assert_discoverable

# With a PIN: set it, then PIN-protected discoverable credentials, hmac-secret, credential management.
step fido2-token-set-pin pin fido2-token -S "$DEV"
step fido2-token-info-pin bash -c "fido2-token -I $DEV | tee /dev/stderr | grep -qw clientPin && fido2-token -I $DEV | grep -q 'pin retries: 8'"
step fido2-token-change-pin pin fido2-token -C "$DEV"
wrap=pin step fido2-cred-discoverable-pin-hmac make_cred pinrk -r -h
step fido2-assert-hmac-secret assert_hmac
step fido2-token-list-rps list_rps
step fido2-token-list-credentials list_creds
step fido2-token-delete-credential delete_cred
fi
fi

cleanup stop-key stop_key
[ "$key_transport" = uhid ] && step hub-keys-come-and-go-on-uhid hub_keys_come_and_go
}
