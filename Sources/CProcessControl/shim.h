#include <unistd.h>
#include <sys/syscall.h>

// CPU affinity through the raw system calls (glibc's CPU_SET macros need _GNU_SOURCE, which this module is built
// without): the bench gives a busy-polling server and its client a CPU each. A mask covers CPUs 0 to 1023.
struct fidosim_cpu_mask {
    unsigned long bits[16];
};

/// The CPUs `pid` (0: the caller) may run on; returns 0, or -1 with errno set.
static inline int fidosim_get_affinity(int pid, struct fidosim_cpu_mask *mask) {
    *mask = (struct fidosim_cpu_mask){{0}};
    return syscall(SYS_sched_getaffinity, pid, sizeof(mask->bits), mask->bits) < 0 ? -1 : 0;
}

/// Lets `pid` (0: the caller) run only on the CPUs of `mask`; returns 0, or -1 with errno set.
static inline int fidosim_set_affinity(int pid, const struct fidosim_cpu_mask *mask) {
    return (int)syscall(SYS_sched_setaffinity, pid, sizeof(mask->bits), mask->bits);
}

// glibc keeps freed heap pages resident. `serve` decodes every flash record once at start-up and then keeps only an
// index, so it hands the pages those decodes used back to the kernel.
#include <malloc.h>

static inline void fidosim_trim_heap(void) { malloc_trim(0); }

// The process holds keys: no core dump, and no other process of the same user may read its memory (ptrace,
// /proc/PID/mem) once it is not dumpable.
#include <sys/prctl.h>
static inline int fidosim_set_undumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
static inline int fidosim_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
