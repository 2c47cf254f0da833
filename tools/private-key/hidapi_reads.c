/* hidraw's read rules as hidapi's hidraw backend meets them, on the first FIDO key it enumerates: the key must be
 * listed with its FIDO usage page, and every read returns one report whatever the buffer (65 or 4096 bytes), a
 * short read takes the head of one report and drops its rest, a non-blocking read with nothing waiting returns 0.
 * Prints one line per check; exits 1 on the first that fails. Built and run by tools/interop/test_private_key.py. */
#include <hidapi/hidapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static int fail(const char *what) {
    printf("FAIL %s\n", what);
    return 1;
}

/* Sends CTAPHID_INIT on the broadcast channel with nonce n. */
static int send_init(hid_device *dev, unsigned char n) {
    unsigned char report[65] = {0};
    report[1] = report[2] = report[3] = report[4] = 0xff;
    report[5] = 0x86; /* INIT */
    report[7] = 8;
    memset(report + 8, n, 8);
    return hid_write(dev, report, sizeof report) == (int)sizeof report ? 0 : -1;
}

int main(void) {
    if (hid_init() != 0) return fail("hid_init");
    struct hid_device_info *list = hid_enumerate(0, 0), *fido = NULL;
    for (struct hid_device_info *d = list; d != NULL; d = d->next) {
        printf("device %s vid=%04x pid=%04x usage_page=%04x usage=%02x serial=%ls product=%ls\n", d->path,
               d->vendor_id, d->product_id, d->usage_page, d->usage, d->serial_number ? d->serial_number : L"",
               d->product_string ? d->product_string : L"");
        if (d->usage_page == 0xF1D0 && fido == NULL) fido = d;
    }
    if (fido == NULL) return fail("no device with usage page 0xF1D0");
    hid_device *dev = hid_open_path(fido->path);
    if (dev == NULL) return fail("hid_open_path");
    unsigned char buffer[4096];

    if (send_init(dev, 1) != 0) return fail("write");
    int n = hid_read_timeout(dev, buffer, 65, 2000);
    printf("read65 %d nonce-ok=%d\n", n, n == 64 && buffer[7] == 1);
    if (n != 64 || buffer[7] != 1) return fail("a 65-byte read returns one 64-byte report");

    /* Two answers wait; a 4096-byte read still returns one of them. */
    if (send_init(dev, 2) != 0 || send_init(dev, 3) != 0) return fail("write");
    n = hid_read_timeout(dev, buffer, sizeof buffer, 2000);
    printf("read4096 %d nonce=%d\n", n, buffer[7]);
    if (n != 64 || buffer[7] != 2) return fail("a 4096-byte read returns one report");
    n = hid_read_timeout(dev, buffer, sizeof buffer, 2000);
    printf("read4096 %d nonce=%d\n", n, buffer[7]);
    if (n != 64 || buffer[7] != 3) return fail("the next read returns the next report");

    /* A short read takes the head of one report; the next read is a whole next report. */
    if (send_init(dev, 4) != 0 || send_init(dev, 5) != 0) return fail("write");
    n = hid_read_timeout(dev, buffer, 10, 2000);
    printf("read10 %d nonce=%d\n", n, buffer[7]);
    if (n != 10 || buffer[7] != 4) return fail("a 10-byte read returns the first 10 bytes of a report");
    n = hid_read_timeout(dev, buffer, sizeof buffer, 2000);
    printf("read-after-short %d nonce=%d\n", n, buffer[7]);
    if (n != 64 || buffer[7] != 5) return fail("the rest of a short-read report is dropped");

    /* Nothing waits: a timed read times out, a non-blocking one returns 0 at once. */
    n = hid_read_timeout(dev, buffer, sizeof buffer, 300);
    printf("read-timeout %d\n", n);
    if (n != 0) return fail("a timed read with nothing waiting returns 0");
    hid_set_nonblocking(dev, 1);
    n = hid_read(dev, buffer, sizeof buffer);
    printf("read-nonblocking %d\n", n);
    if (n != 0) return fail("a non-blocking read with nothing waiting returns 0");

    hid_close(dev);
    hid_free_enumeration(list);
    hid_exit();
    printf("OK\n");
    return 0;
}
