// (sys/epoll.h: the USB/IP transport polls its listener and connections through one epoll descriptor.)
// sendmmsg is a GNU extension that Swift's Glibc module does not show (it is built without _GNU_SOURCE), so it is
// reached through syscall() with the kernel's struct mmsghdr layout: several datagrams handed to the kernel in one
// call (UDPTransport sends the reports of an answer with it, and drains what is waiting with recvmmsg).
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <unistd.h>
#include <string.h>
#include <errno.h>

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

// UDP generic segmentation offload (Linux 4.18): one sendmsg hands the kernel several datagrams of one size, which
// it carries as one packet through the stack and cuts apart only where they are delivered. Over loopback this
// halves what the sender's call costs for the five reports of a getAssertion answer, against sendmmsg.
#define FIDOSIM_SOL_UDP 17
#define FIDOSIM_UDP_SEGMENT 103

/// Whether the kernel knows UDP_SEGMENT on `fd` (Linux 4.18 and later answer the option; older kernels refuse it,
/// and would send a segmented batch as one long datagram, ignoring the control message).
static inline int fidosim_udp_segmentation_supported(int fd) {
    int size = 0;
    socklen_t length = sizeof(size);
    return getsockopt(fd, FIDOSIM_SOL_UDP, FIDOSIM_UDP_SEGMENT, &size, &length) == 0;
}

/// Sends `count` datagrams of `segment` bytes each (the last may be shorter; `total` bytes in all, one after another
/// in `bytes`) to `to`, 64 to a sendmsg with UDP_SEGMENT. Returns how many the kernel took, or, when the first call
/// failed, minus its errno (EINVAL, ENOPROTOOPT or EIO when the kernel or the route cannot segment).
static inline int fidosim_send_segmented(int fd, const struct sockaddr_in *to, const unsigned char *bytes,
                                         unsigned int segment, unsigned int count, unsigned int total) {
    unsigned int sent = 0;
    while (sent < count) {
        unsigned int n = count - sent < 64 ? count - sent : 64;
        unsigned int offset = sent * segment;
        unsigned int length = sent + n == count ? total - offset : n * segment;
        struct iovec iov = {.iov_base = (void *)(bytes + offset), .iov_len = length};
        union {
            char buffer[CMSG_SPACE(sizeof(unsigned short))];
            struct cmsghdr align;
        } control;
        struct msghdr message = {.msg_name = (void *)to, .msg_namelen = sizeof(*to), .msg_iov = &iov,
                                 .msg_iovlen = 1, .msg_control = control.buffer,
                                 .msg_controllen = sizeof(control.buffer)};
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = FIDOSIM_SOL_UDP;
        header->cmsg_type = FIDOSIM_UDP_SEGMENT;
        header->cmsg_len = CMSG_LEN(sizeof(unsigned short));
        unsigned short size = (unsigned short)segment;
        memcpy(CMSG_DATA(header), &size, sizeof(size));
        if (sendmsg(fd, &message, 0) < 0) return sent == 0 ? -errno : (int)sent;
        sent += n;
    }
    return (int)sent;
}

/// Receives up to `max` waiting datagrams without blocking, in one recvmmsg: datagram i lands at `bytes + i * stride`
/// (cut to `stride` bytes) with its length in `lengths[i]` and its sender in `from[i]`.
/// Returns how many were received, or -1 (errno set; EAGAIN when none was waiting).
static inline int fidosim_receive_datagrams(int fd, unsigned char *bytes, unsigned int stride, unsigned int *lengths,
                                            unsigned int max, struct sockaddr_in *from) {
    struct iovec iov[512];
    struct fidosim_mmsghdr headers[512];
    if (max > 512) max = 512;
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
    return (int)got;
}
