// The Linux uhid interface: event types and structure sizes (the bridge lays out the bytes itself).
#include <linux/uhid.h>

// sendmmsg is a GNU extension that Swift's Glibc module does not show (it is built without _GNU_SOURCE), so it is
// reached through syscall() with the kernel's struct mmsghdr layout: several datagrams handed to the kernel in one
// call (UDPTransport sends the reports of an answer with it, and drains what is waiting with recvmmsg).
#include <sys/socket.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <unistd.h>

struct fidosim_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};

/// Sends `count` datagrams (their lengths in `lengths`, their bytes one after another in `bytes`) to `to`. Returns
/// how many the kernel took; the rest are dropped, as UDP may drop any datagram.
static inline int fidosim_send_datagrams(int fd, const struct sockaddr_in *to, const unsigned char *bytes,
                                         const unsigned int *lengths, unsigned int count) {
    struct iovec iov[64];
    struct fidosim_mmsghdr headers[64];
    unsigned int sent = 0;
    const unsigned char *next = bytes;
    while (sent < count) {
        unsigned int n = count - sent < 64 ? count - sent : 64;
        for (unsigned int i = 0; i < n; i++) {
            iov[i].iov_base = (void *)next;
            iov[i].iov_len = lengths[sent + i];
            next += lengths[sent + i];
            headers[i].msg_hdr = (struct msghdr){.msg_name = (void *)to, .msg_namelen = sizeof(*to),
                                                 .msg_iov = &iov[i], .msg_iovlen = 1};
            headers[i].msg_len = 0;
        }
        long done = syscall(SYS_sendmmsg, fd, headers, n, 0);
        if (done <= 0) return (int)sent;
        sent += (unsigned int)done;
        if ((unsigned int)done < n) return (int)sent;
    }
    return (int)sent;
}

/// Receives up to `max` waiting datagrams without blocking, in one recvmmsg: datagram i lands at `bytes + i * stride`
/// (cut to `stride` bytes) with its length in `lengths[i]`; the sender of the last one is written to `last_from`.
/// Returns how many were received, or -1 (errno set; EAGAIN when none was waiting).
static inline int fidosim_receive_datagrams(int fd, unsigned char *bytes, unsigned int stride, unsigned int *lengths,
                                            unsigned int max, struct sockaddr_in *last_from) {
    struct iovec iov[64];
    struct fidosim_mmsghdr headers[64];
    struct sockaddr_in from[64];
    if (max > 64) max = 64;
    for (unsigned int i = 0; i < max; i++) {
        iov[i].iov_base = bytes + (size_t)i * stride;
        iov[i].iov_len = stride;
        headers[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof(from[i]),
                                             .msg_iov = &iov[i], .msg_iovlen = 1};
        headers[i].msg_len = 0;
    }
    long got = syscall(SYS_recvmmsg, fd, headers, max, MSG_DONTWAIT, NULL);
    if (got <= 0) return got == 0 ? 0 : -1;
    for (long i = 0; i < got; i++) lengths[i] = headers[i].msg_len;
    *last_from = from[got - 1];
    return (int)got;
}

// glibc keeps freed heap pages resident. `serve` decodes every flash record once at start-up and then keeps only an
// index, so it hands the pages those decodes used back to the kernel.
#include <malloc.h>

static inline void fidosim_trim_heap(void) { malloc_trim(0); }
