# The VM run's daily-key group: a uhid key in prompt mode whose terminal answers. Sourced by inside-vm.sh;
# e2e_daily runs it in the current round.

e2e_daily() {
# --- a daily key: on uhid without --presence, nothing is signed until the person answers its terminal ---------
if want libfido2; then
touch_daily() {
    make_cred daily &
    local pid=$!
    wait_for 20 "the daily key to ask" grep -q "touch requested: makeCredential for example.com" \
        "$out/serve-e2e-daily.log" || { kill $pid; return 1; }
    sleep 1
    kill -0 $pid 2>/dev/null || { echo "makeCredential ended without a touch"; return 1; }
    echo y >&7
    wait $pid
}
group
daily_in="$HOME/daily-terminal.fifo"
rm -f "$daily_in" && mkfifo "$daily_in" && exec 7<>"$daily_in"
gate start-daily-key start_key e2e-daily --name daily --flash memory
daily_in=
step daily-key-prompts-by-default grep -q "presence: prompt, the default on uhid" "$out/serve-e2e-daily.log"
step daily-key-does-not-warn bash -c "! grep -q 'warning: presence' '$out/serve-e2e-daily.log'"
step daily-key-waits-for-the-person touch_daily
cleanup stop-daily-key stop_key
exec 7>&-
fi
}
