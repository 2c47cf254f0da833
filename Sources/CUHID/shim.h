// The Linux uhid interface: event types and structure sizes (the bridge lays out the bytes itself).
#include <linux/uhid.h>
