// The Linux uhid interface: event types and structure sizes (the bridge lays out the bytes itself).
#include <linux/uhid.h>

// sendmmsg is a GNU extension that Swift's Glibc module does not show (it is built without _GNU_SOURCE), so it is
// reached through syscall() with the kernel's struct mmsghdr layout: several datagrams handed to the kernel in one
// call (UDPTransport sends the reports of an answer with it).
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

// glibc keeps freed heap pages resident. `serve` decodes every flash record once at start-up and then keeps only an
// index, so it hands the pages those decodes used back to the kernel.
#include <malloc.h>

static inline void fidosim_trim_heap(void) { malloc_trim(0); }
