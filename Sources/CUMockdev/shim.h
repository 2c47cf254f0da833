// umockdev's testbed library (Debian's libumockdev0), loaded at run time so that fidosim starts on machines without
// it: `fidosim run` and `serve --transport private` load it when they start and say which packages to install when
// it is missing. Only the library's public C API (umockdev.h of libumockdev-dev 0.17) is used; the private protocol
// between it and its preload library stays theirs.
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <fcntl.h>

/// The public members of UMockdevIoctlData (umockdev.h): the client's buffer, copied into the testbed.
struct fidosim_umockdev_ioctl_data {
    void *g_class;
    unsigned int ref_count;
    void *qdata;
    uint8_t *data;
    int data_len;
    unsigned long client_addr;
    void *priv;
};

/// GLib's GError, as glib/gerror.h lays it out.
struct fidosim_gerror {
    uint32_t domain;
    int code;
    char *message;
};

/// A handler of the ioctl base's handle-ioctl, handle-read and handle-write signals; returns non-zero when it
/// answers (now or later, through complete).
typedef int (*fidosim_umockdev_handler)(void *base, void *client, void *context);
/// A handler of the ioctl base's client-connected signal.
typedef void (*fidosim_umockdev_connected)(void *base, void *client, void *context);

/// The functions fidosim calls, looked up in libumockdev.so.0 (and the GLib it links).
struct fidosim_umockdev {
    void *(*testbed_new)(void);
    char *(*testbed_get_root_dir)(void *testbed);
    int (*testbed_add_from_string)(void *testbed, const char *data, struct fidosim_gerror **error);
    void (*testbed_remove_device)(void *testbed, const char *syspath);
    void (*testbed_uevent)(void *testbed, const char *devpath, const char *action);
    int (*testbed_attach_ioctl)(void *testbed, const char *dev, void *handler, struct fidosim_gerror **error);
    int (*testbed_get_dev_fd)(void *testbed, const char *devnode);
    void *(*ioctl_base_new)(void);
    unsigned long (*ioctl_client_get_request)(void *client);
    struct fidosim_umockdev_ioctl_data *(*ioctl_client_get_arg)(void *client);
    int (*ioctl_client_get_connected)(void *client);
    int (*ioctl_client_execute)(void *client, int *errno_, struct fidosim_gerror **error);
    void (*ioctl_client_complete)(void *client, long result, int errno_);
    struct fidosim_umockdev_ioctl_data *(*ioctl_data_resolve)(
        struct fidosim_umockdev_ioctl_data *data, size_t offset, size_t len, struct fidosim_gerror **error);
    void (*ioctl_data_update)(struct fidosim_umockdev_ioctl_data *data, size_t offset, const uint8_t *bytes, int len);
    void *(*object_ref)(void *object);
    void (*object_unref)(void *object);
    unsigned long (*signal_connect_data)(
        void *instance, const char *signal, void (*handler)(void), void *data, void *destroy, int flags);
    void (*free)(void *memory);
    void (*error_free)(struct fidosim_gerror *error);
};

/// Loads libumockdev.so.0 and looks up every function; returns 0, or -1 with the reason in `why`.
static inline int fidosim_umockdev_load(struct fidosim_umockdev *api, char *why, size_t why_len) {
    void *lib = dlopen("libumockdev.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        snprintf(why, why_len, "%s", dlerror());
        return -1;
    }
#define FIDOSIM_UMOCKDEV_SYMBOL(member, name)                                                                         \
    *(void **)&api->member = dlsym(lib, name);                                                                        \
    if (api->member == NULL) {                                                                                        \
        snprintf(why, why_len, "libumockdev.so.0 lacks %s", name);                                                    \
        return -1;                                                                                                    \
    }
    FIDOSIM_UMOCKDEV_SYMBOL(testbed_new, "umockdev_testbed_new")
    FIDOSIM_UMOCKDEV_SYMBOL(testbed_get_root_dir, "umockdev_testbed_get_root_dir")
    FIDOSIM_UMOCKDEV_SYMBOL(testbed_add_from_string, "umockdev_testbed_add_from_string")
    FIDOSIM_UMOCKDEV_SYMBOL(testbed_remove_device, "umockdev_testbed_remove_device")
    FIDOSIM_UMOCKDEV_SYMBOL(testbed_uevent, "umockdev_testbed_uevent")
    FIDOSIM_UMOCKDEV_SYMBOL(testbed_attach_ioctl, "umockdev_testbed_attach_ioctl")
    FIDOSIM_UMOCKDEV_SYMBOL(testbed_get_dev_fd, "umockdev_testbed_get_dev_fd")
    FIDOSIM_UMOCKDEV_SYMBOL(ioctl_base_new, "umockdev_ioctl_base_new")
    FIDOSIM_UMOCKDEV_SYMBOL(ioctl_client_get_request, "umockdev_ioctl_client_get_request")
    FIDOSIM_UMOCKDEV_SYMBOL(ioctl_client_get_arg, "umockdev_ioctl_client_get_arg")
    FIDOSIM_UMOCKDEV_SYMBOL(ioctl_client_get_connected, "umockdev_ioctl_client_get_connected")
    FIDOSIM_UMOCKDEV_SYMBOL(ioctl_client_execute, "umockdev_ioctl_client_execute")
    FIDOSIM_UMOCKDEV_SYMBOL(ioctl_client_complete, "umockdev_ioctl_client_complete")
    FIDOSIM_UMOCKDEV_SYMBOL(ioctl_data_resolve, "umockdev_ioctl_data_resolve")
    FIDOSIM_UMOCKDEV_SYMBOL(ioctl_data_update, "umockdev_ioctl_data_update")
    FIDOSIM_UMOCKDEV_SYMBOL(object_ref, "g_object_ref")
    FIDOSIM_UMOCKDEV_SYMBOL(object_unref, "g_object_unref")
    FIDOSIM_UMOCKDEV_SYMBOL(signal_connect_data, "g_signal_connect_data")
    FIDOSIM_UMOCKDEV_SYMBOL(free, "g_free")
    FIDOSIM_UMOCKDEV_SYMBOL(error_free, "g_error_free")
#undef FIDOSIM_UMOCKDEV_SYMBOL
    return 0;
}

/// Connects a handler to one of the ioctl base's boolean signals (handle-ioctl, handle-read, handle-write).
static inline void fidosim_umockdev_connect(
    const struct fidosim_umockdev *api, void *base, const char *signal, fidosim_umockdev_handler handler,
    void *context) {
    api->signal_connect_data(base, signal, (void (*)(void))handler, context, NULL, 0);
}

/// Connects a handler to the ioctl base's client-connected signal.
static inline void fidosim_umockdev_connect_client(
    const struct fidosim_umockdev *api, void *base, fidosim_umockdev_connected handler, void *context) {
    api->signal_connect_data(base, "client-connected", (void (*)(void))handler, context, NULL, 0);
}

/// Opens the slave side of the pseudo-terminal whose master is `master` (TIOCGPTPEER, Linux 4.13), without a
/// controlling terminal and without blocking; returns the descriptor or -1.
static inline int fidosim_pty_peer(int master) {
#ifdef TIOCGPTPEER
    return ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
#else
    return -1;
#endif
}

/// Whether umockdev's preload library is loaded in this process (without loading it).
static inline int fidosim_umockdev_preloaded(void) {
    void *preload = dlopen("libumockdev-preload.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (preload == NULL) return 0;
    dlclose(preload);
    return 1;
}
