# The host run's PAM group: Debian's pam_u2f (and its pamu2fcfg) through pamtester, with a private key. Sourced by
# run-host.sh; e2e_pam runs it. The PAM service fidosim-e2e (/etc/pam.d/fidosim-e2e, `auth required pam_u2f.so`)
# is installed by `make host-e2e` as root; pam_u2f reads the mapping from the user's own ~/.config/Yubico/u2f_keys.

e2e_pam() {
if want pam; then
    group
    # pam-u2f 1.1.0 (Debian 12) verifies every registration's attestation, which needs a certificate (x5c): a fresh
    # default key has one, fidosim's shared batch, as a hardware key has its factory's.
    gate start-key-pam start_key e2e-pam --flash memory --control "$HOME/pam.sock"
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
    # The profile that imitates a YubiKey 5 enrolls and authenticates too.
    group
    gate start-yubikey5-pam start_key e2e-pam-yk --flash memory --profile yubikey5
    step pamu2fcfg-enrolls-yubikey5 bash -c "pamu2fcfg -u '$(id -un)' -o pam://fidosim-e2e -i pam://fidosim-e2e \
        >'$pam_home/.config/Yubico/u2f_keys'"
    step pamtester-authenticates-yubikey5 bash -c "pamtester fidosim-e2e '$(id -un)' authenticate </dev/null"
    cleanup stop-yubikey5-pam stop_key
    # Why the default key attests with a batch: with self attestation (no x5c) this pamu2fcfg refuses to enroll.
    group
    gate self-attestation-profile bash -c "printf '{\"name\": \"self\", \"attestation\": \"self\"}' \
        >'$HOME/self-attestation.json'"
    gate start-self-key-pam start_key e2e-pam-self --flash memory --profile "$HOME/self-attestation.json"
    step pamu2fcfg-refuses-self-attestation bash -c "out=\$(pamu2fcfg -u '$(id -un)' -o pam://fidosim-e2e \
        -i pam://fidosim-e2e 2>&1 >/dev/null); rc=\$?; echo \"\$out\"; \
        [ \$rc -ne 0 ] && grep -q fido_cred_verify <<<\"\$out\""
    cleanup stop-self-key-pam stop_key
fi
}
