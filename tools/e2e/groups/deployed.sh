# The host run's deployed-clients group: the clients as Debian 12 ships them, each with a PIN, on the default key and
# on the profile that imitates a YubiKey 5 (5.7, CTAP 2.1): fido2-token's credential management, OpenSSH's resident
# keys (ssh-keygen -K) and a login to a real sshd with one, pam_u2f with pinverification, and a LUKS2 volume
# enrolled with systemd-cryptenroll (PIN and presence) and unlocked again through systemd's FIDO2 token plugin.
# Sourced by run-host.sh; e2e_deployed runs it. The PAM service fidosim-e2e-pin is installed by `make host-e2e` as
# root.

# A LUKS2 volume in a file, with a fast PBKDF: the passphrase only opens it for the enrollment (cryptsetup is in
# /usr/sbin, outside the run's PATH).
luks_volume() { # $1 file
    rm -f "$1" && truncate -s 20M "$1" && printf 'passphrase' >"$1.pass" &&
        /usr/sbin/cryptsetup luksFormat --batch-mode --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 "$1" "$1.pass"
}
cryptenroll() { # $1 file: a FIDO2 token slot that needs the PIN and a touch
    PASSWORD=passphrase pin systemd-cryptenroll --fido2-device="$DEV" --fido2-with-client-pin=yes \
        --fido2-with-user-presence=yes "$1" && /usr/sbin/cryptsetup luksDump "$1" | grep -q systemd-fido2
}
# cryptsetup with systemd's token plugin (libcryptsetup-token-systemd-fido2: the code systemd-cryptsetup unlocks
# with) asks the key for the slot's secret; --test-passphrase needs no device-mapper, so no root.
token_unlocks() {
    pin /usr/sbin/cryptsetup open --test-passphrase --token-only -v "$1" 2>&1 | tee /dev/stderr |
        grep -q "Key slot 1 unlocked"
}
token_refuses() { # the key answers with the PIN and a touch, and its secret does not open the slot
    pin /usr/sbin/cryptsetup open --test-passphrase --token-only -v "$1" >unlock.out 2>&1
    local rc=$?
    cat unlock.out
    [ $rc -ne 0 ] && grep -q "Asking FIDO2 token for authentication" unlock.out &&
        grep -q "no permission or bad passphrase" unlock.out
}
pam_pin_refused() { ! pam_pin_login "$1"; }
pam_enroll_with_pin() { # $1 the mapping file: pamu2fcfg -N (pin verification) on the terminal, its line kept
    mkdir -p "$(dirname "$1")" &&
        pin pamu2fcfg -N -u "$(id -un)" -o pam://fidosim-e2e -i pam://fidosim-e2e | tr -d '\r' |
        grep "^$(id -un):" >"$1" && grep -q '+pin' "$1"
}
pam_pin_login() { # $1 the PIN typed: pamtester through the service whose pam_u2f has pinverification=1
    "$python" "$repo/tools/e2e/answer_pin.py" "$1" pamtester -v fidosim-e2e-pin "$(id -un)" authenticate 2>&1 |
        tee /dev/stderr | grep -q 'successfully authenticated'
}

e2e_deployed() {
if want deployed; then
    local profile here=$PWD pam_home
    pam_home=$(getent passwd "$(id -un)" | cut -d: -f6)
    for profile in fidosim yubikey5; do
        group
        mkdir -p "$here/deployed-$profile" && cd "$here/deployed-$profile" || return 1
        gate "start-deployed-$profile" start_key "e2e-dep-$profile" --flash memory --profile "$profile"
        step "deployed-$profile-set-pin" pin fido2-token -S "$DEV"
        # fido2-token's credential management with the PIN.
        wrap=pin step "deployed-$profile-fido2-cred-pin" make_cred pinrk -r
        step "deployed-$profile-fido2-token-list-rps" list_rps
        step "deployed-$profile-fido2-token-list-credentials" list_creds
        step "deployed-$profile-fido2-token-delete" delete_cred
        # OpenSSH: a resident key made with the PIN, downloaded again with ssh-keygen -K, a login to sshd with it.
        step "deployed-$profile-ssh-keygen-resident" pin ssh-keygen -t ecdsa-sk -O resident -O application=ssh:e2e \
            -f id_rk -N "" -C e2e
        step "deployed-$profile-ssh-keygen-K" download_resident
        step "deployed-$profile-ssh-login-resident" ssh_login id_rk
        # pam_u2f with pinverification: the PIN at enrollment (-N) and at every login.
        step "deployed-$profile-pamu2fcfg-pin" pam_enroll_with_pin "$pam_home/.config/Yubico/u2f_keys"
        step "deployed-$profile-pamtester-pinverification" pam_pin_login 1234
        step "deployed-$profile-pamtester-refuses-a-wrong-pin" pam_pin_refused 4321
        # systemd-cryptenroll asks for no PIN on a CTAP 2.1 key that makes credentials without one
        # (makeCredUvNotRqd), so its secret is the one without UV while the unlock, with the PIN, gets the other
        # (CTAP 2.1 §12.5: two CredRandoms): the unlock fails, as on a YubiKey 5.7 (systemd#31443). alwaysUv, the
        # known workaround, makes the enrollment ask for the PIN, and the volume unlocks.
        step "deployed-$profile-luks-volume" luks_volume vol.img
        step "deployed-$profile-cryptenroll-without-uv" cryptenroll vol.img
        step "deployed-$profile-unlock-fails-as-on-a-ctap21-key" token_refuses vol.img
        step "deployed-$profile-always-uv" pin fido2-token -S -u "$DEV"
        step "deployed-$profile-luks-volume-again" luks_volume vol2.img
        step "deployed-$profile-cryptenroll-with-pin" cryptenroll vol2.img
        step "deployed-$profile-cryptsetup-token-unlocks" token_unlocks vol2.img
        cleanup "stop-deployed-$profile" stop_key
        cd "$here" || return 1
    done
fi
}
