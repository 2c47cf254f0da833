// hidapi (hidraw backend, linked). The libusb backend has the same symbols, so FIDOClient loads it with dlopen
// when asked for it, through the function types declared here.
#include <hidapi/hidapi.h>
