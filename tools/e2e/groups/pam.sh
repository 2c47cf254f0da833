# The host run's PAM group: Debian's pam_u2f (and its pamu2fcfg) through pamtester, with a private key. Sourced by
# run-host.sh; e2e_pam runs it. The PAM service fidosim-e2e (/etc/pam.d/fidosim-e2e, `auth required pam_u2f.so`)
# is installed by `make host-e2e` as root; pam_u2f reads the mapping from the user's own ~/.config/Yubico/u2f_keys.

e2e_pam() {
if want pam; then
    group
    # pam-u2f 1.1.0 (Debian 12) verifies every registration's attestation, which needs a certificate (x5c): the
    # key gets a batch attestation first, as a hardware key has from its factory.
    gate start-key-pam start_key e2e-pam --flash memory --control "$HOME/pam.sock"
    gate provision-pam "$bin" attestation provision --socket "$HOME/pam.sock" --root-out "$HOME/pam-root.pem"
    pam_home=$(getent passwd "$(id -un)" | cut -d: -f6)
    step pam-service-installed test -f /etc/pam.d/fidosim-e2e
    step pamu2fcfg-enrolls bash -c "mkdir -p '$pam_home/.config/Yubico' && pamu2fcfg -u '$(id -un)' \
        -o pam://fidosim-e2e -i pam://fidosim-e2e >'$pam_home/.config/Yubico/u2f_keys' && \
        cat '$pam_home/.config/Yubico/u2f_keys' | grep -q '^$(id -un):'"
    step pamtester-authenticates bash -c "pamtester -v fidosim-e2e '$(id -un)' authenticate 2>&1 </dev/null | \
        tee /dev/stderr | grep -q 'successfully authenticated'"
    # A key that is not the enrolled one is refused.
    cleanup stop-key-pam stop_key
    group
    gate start-other-key-pam start_key e2e-pam-other --flash memory
    step pamtester-refuses-another-key bash -c "! pamtester fidosim-e2e '$(id -un)' authenticate </dev/null"
    cleanup stop-other-key-pam stop_key
fi
}
