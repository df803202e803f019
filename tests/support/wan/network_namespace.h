// Network namespaces and TUN devices for the WAN emulator: what this machine must allow, the
// `ip` commands that make and configure them, and running code inside a namespace.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace tessel::wan {

// The emulator cannot run here; the message names the missing privilege, device or tool.
class WanUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws WanUnavailable unless this process can make namespaces and TUN devices: CAP_NET_ADMIN
// and CAP_SYS_ADMIN (root), /dev/net/tun that opens, iproute2's `ip` on the PATH.
void check_wan_privileges();

// Runs `command` with /bin/sh; its exit status (-1 when it could not run), its output (stdout
// and stderr) in `output`.
int run_shell(const std::string& command, std::string& output);
// Runs `command`; throws std::runtime_error naming it and its output when it fails.
void run_or_throw(const std::string& command);

// Whether /var/run/netns/<name> exists (made by `ip netns add`).
bool namespace_exists(const std::string& name);

// Runs `action` on a thread that entered namespace `name` (this thread stays where it is);
// sockets made there stay in that namespace. Rethrows what `action` throws.
void run_in_namespace(const std::string& name, const std::function<void()>& action);

// Opens a TUN device `device` (IFF_TUN, no packet information, non-blocking) inside namespace
// `netns`; the device lives as long as the returned descriptor. With `offload`, every packet
// read or written starts with a struct virtio_net_hdr (IFF_VNET_HDR), and the device takes
// checksum and TCP segmentation offload (TUN_F_CSUM | TUN_F_TSO4): the kernel hands it IPv4 TCP
// super-packets of up to 64 KB, and takes them whole when they are written.
int open_tun_in(const std::string& netns, const std::string& device, bool offload);

}  // namespace tessel::wan
