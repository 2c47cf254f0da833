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

// Who owns a socket, asked of the kernel (sock_diag over netlink, as ss(8) asks): one connection by its addresses,
// or the sockets on one UDP port, never the whole table as text. PeerAccess judges the answers.
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>
#include <stdint.h>
#include <arpa/inet.h>

/// A netlink socket for sock_diag queries (close-on-exec), or -1.
static inline int fidosim_diag_open(void) {
    return socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
}

/// Sends one inet_diag request (a dump when `dump`); returns 0, or -errno.
static inline int fidosim_diag_send(int fd, const struct inet_diag_req_v2 *request, int dump, unsigned int seq) {
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof(message));
    message.header.nlmsg_len = sizeof(message);
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST | (dump ? NLM_F_DUMP : 0);
    message.header.nlmsg_seq = seq;
    message.request = *request;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    ssize_t sent;
    do {
        sent = sendto(fd, &message, sizeof(message), 0, (struct sockaddr *)&kernel, sizeof(kernel));
    } while (sent < 0 && errno == EINTR);
    return sent == (ssize_t)sizeof(message) ? 0 : (sent < 0 ? -errno : -EIO);
}

/// One socket the kernel described: its owner, inode (0 for a socket no process holds: TIME_WAIT, an orphan),
/// TCP state (UDP: 7 unconnected, 1 connected), family and local address (IPv4: the first word).
struct fidosim_diag_socket {
    uint32_t uid;
    uint32_t inode;
    uint8_t state;
    uint8_t family;
    uint32_t local[4];
    uint16_t localPort;
    uint16_t remotePort;
};

/// Reads the kernel's answers to request `seq` into `out` (at most `max`; `*count` is how many there were, which may
/// be more). Returns 0 when the answer is complete, -ENOENT when the kernel has no such socket, or -errno.
static inline int fidosim_diag_receive(int fd, unsigned int seq, struct fidosim_diag_socket *out, unsigned int max,
                                       unsigned int *count) {
    static __thread char buffer[32768] __attribute__((aligned(8)));
    *count = 0;
    for (;;) {
        ssize_t got;
        do {
            got = recv(fd, buffer, sizeof(buffer), 0);
        } while (got < 0 && errno == EINTR);
        if (got < 0) return -errno;
        if (got == 0) return -EIO;
        int length = (int)got;
        for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, length);
             header = NLMSG_NEXT(header, length)) {
            if (header->nlmsg_seq != seq) continue;
            if (header->nlmsg_type == NLMSG_DONE) return 0;
            if (header->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr *error = (struct nlmsgerr *)NLMSG_DATA(header);
                if (header->nlmsg_len < NLMSG_LENGTH(sizeof(*error))) return -EIO;
                return error->error == 0 ? 0 : error->error;
            }
            if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
                header->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) continue;
            struct inet_diag_msg *message = (struct inet_diag_msg *)NLMSG_DATA(header);
            if (*count < max) {
                struct fidosim_diag_socket *socket = &out[*count];
                socket->uid = message->idiag_uid;
                socket->inode = message->idiag_inode;
                socket->state = message->idiag_state;
                socket->family = message->idiag_family;
                memcpy(socket->local, message->id.idiag_src, sizeof(socket->local));
                socket->localPort = ntohs(message->id.idiag_sport);
                socket->remotePort = ntohs(message->id.idiag_dport);
            }
            *count += 1;
            // An answer to a request that is not a dump is one message, with no NLMSG_DONE after it.
            if (!(header->nlmsg_flags & NLM_F_MULTI)) return 0;
        }
    }
}

/// The TCP socket whose local end is `local`:`localPort` and whose other end is `remote`:`remotePort` (IPv4, host
/// order): the kernel's exact lookup of one connection (an IPv6 socket connected over a mapped address is found
/// too). Returns 1 with `*found` filled, 0 when the kernel has no such socket, or -errno.
static inline int fidosim_diag_tcp(int fd, uint32_t local, uint16_t localPort, uint32_t remote, uint16_t remotePort,
                                   unsigned int seq, struct fidosim_diag_socket *found) {
    struct inet_diag_req_v2 request;
    memset(&request, 0, sizeof(request));
    request.sdiag_family = AF_INET;
    request.sdiag_protocol = IPPROTO_TCP;
    request.idiag_states = ~0u;
    request.id.idiag_sport = htons(localPort);
    request.id.idiag_dport = htons(remotePort);
    request.id.idiag_src[0] = htonl(local);
    request.id.idiag_dst[0] = htonl(remote);
    request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    int sent = fidosim_diag_send(fd, &request, 0, seq);
    if (sent < 0) return sent;
    unsigned int count = 0;
    int status = fidosim_diag_receive(fd, seq, found, 1, &count);
    if (status == -ENOENT) return 0;
    if (status < 0) return status;
    return count > 0 ? 1 : 0;
}

/// Every UDP socket, IPv4 and IPv6, whose local port is `port`, whatever address it is bound to (the kernel
/// compares the port as it walks its table; nothing is formatted). Returns how many there are (only the first
/// `max` are written), or -errno.
static inline int fidosim_diag_udp_port(int fd, uint16_t port, unsigned int seq, struct fidosim_diag_socket *out,
                                        unsigned int max) {
    unsigned int total = 0;
    const unsigned char families[2] = {AF_INET, AF_INET6};
    for (int i = 0; i < 2; i++) {
        struct inet_diag_req_v2 request;
        memset(&request, 0, sizeof(request));
        request.sdiag_family = families[i];
        request.sdiag_protocol = IPPROTO_UDP;
        request.idiag_states = ~0u;
        request.id.idiag_sport = htons(port);
        request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
        request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
        int sent = fidosim_diag_send(fd, &request, 1, seq + (unsigned int)i);
        if (sent < 0) return sent;
        unsigned int count = 0;
        int status = fidosim_diag_receive(fd, seq + (unsigned int)i, total < max ? out + total : out,
                                          total < max ? max - total : 0, &count);
        if (status < 0 && status != -ENOENT) return status;
        total += count;
    }
    return (int)total;
}
