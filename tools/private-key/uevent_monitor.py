"""Prints the udev events a libudev monitor receives, one `EVENT action syspath` line each, for SECONDS seconds (as
Chromium and Firefox watch for keys that come and go). Standard library only: libudev through ctypes.

    python3 uevent_monitor.py SECONDS
"""

import ctypes
import select
import sys
import time

udev = ctypes.CDLL("libudev.so.1")
udev.udev_new.restype = ctypes.c_void_p
udev.udev_monitor_new_from_netlink.restype = ctypes.c_void_p
udev.udev_monitor_new_from_netlink.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
udev.udev_monitor_enable_receiving.argtypes = [ctypes.c_void_p]
udev.udev_monitor_get_fd.argtypes = [ctypes.c_void_p]
udev.udev_monitor_receive_device.restype = ctypes.c_void_p
udev.udev_monitor_receive_device.argtypes = [ctypes.c_void_p]
udev.udev_device_get_action.restype = ctypes.c_char_p
udev.udev_device_get_action.argtypes = [ctypes.c_void_p]
udev.udev_device_get_syspath.restype = ctypes.c_char_p
udev.udev_device_get_syspath.argtypes = [ctypes.c_void_p]

context = udev.udev_new()
monitor = udev.udev_monitor_new_from_netlink(context, b"udev")
if udev.udev_monitor_enable_receiving(monitor) != 0:
    sys.exit("cannot listen for udev events")
print("LISTENING", flush=True)
fd = udev.udev_monitor_get_fd(monitor)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    ready, _, _ = select.select([fd], [], [], 0.1)
    if ready:
        device = udev.udev_monitor_receive_device(monitor)
        if device:
            action = udev.udev_device_get_action(device).decode()
            print("EVENT", action, udev.udev_device_get_syspath(device).decode(), flush=True)
