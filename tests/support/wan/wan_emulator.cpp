#include "tests/support/wan/wan_emulator.h"

#include <unistd.h>

#include <stdexcept>

namespace tessel::wan {
namespace {

// The packets a TUN device queues for the forwarder to read (its txqueuelen; Linux's default is
// 500). The device hands the kernel's TCP no back-pressure, so a forwarder thread that is off
// the CPU for a few milliseconds while a 1 Gbit/s link runs would otherwise see the kernel drop
// packets before they reach the emulated link, a loss no real link has (at 150 ms every such
// loss stalls a stream for a round trip). 20,000 full-size packets: 240 ms at 1 Gbit/s. The
// emulated router queue (queue_ms) stays the only place the link itself drops.
constexpr int kTunQueuePackets = 20000;

}  // namespace

std::unique_ptr<WanEmulator> WanEmulator::start(const WanConfig& config) {
  validate_wan_config(config);
  check_wan_privileges();
  std::unique_ptr<WanEmulator> wan(new WanEmulator());
  wan->config_ = config;
  wan->links_ = link_matrix(config);
  const std::uint32_t base = subnet_base(config.subnet);
  const std::string prefix =
      config.name_prefix.empty() ? "twan" + std::to_string(::getpid()) + "-" : config.name_prefix;
  try {  // on failure the destructor removes what was made
    for (std::size_t i = 0; i < config.size(); ++i) {
      std::string name = config.netns.empty() ? prefix + std::to_string(i) : config.netns[i];
      if (config.netns.empty()) {
        if (namespace_exists(name)) {
          throw std::runtime_error("network namespace " + name + " exists already");
        }
        run_or_throw("ip netns add " + name);
        wan->created_.push_back(name);
      } else if (!namespace_exists(name)) {
        throw std::invalid_argument("netns: network namespace " + name +
                                    " does not exist (/var/run/netns/" + name + ")");
      }
      wan->names_.push_back(name);
      wan->addresses_.push_back(ipv4_text(base + static_cast<std::uint32_t>(i) + 1));
      wan->tun_fds_.push_back(open_tun_in(name, config.tun_name, config.offload));
      const std::string in = "ip -n " + name + " ";
      run_or_throw(in + "link set lo up");
      run_or_throw(in + "addr add " + wan->addresses_.back() + "/24 dev " + config.tun_name);
      run_or_throw(in + "link set " + config.tun_name + " mtu " + std::to_string(config.mtu) +
                   " txqueuelen " + std::to_string(kTunQueuePackets) + " up");
    }
    wan->forwarder_ = std::make_unique<PacketForwarder>(wan->tun_fds_, base, wan->links_,
                                                        config.mtu, config.offload, config.seed);
  } catch (...) {
    wan->stop();
    throw;
  }
  return wan;
}

WanEmulator::~WanEmulator() { stop(); }

void WanEmulator::stop() {
  if (forwarder_) forwarder_->stop();
  for (int fd : tun_fds_) ::close(fd);  // a TUN device that is not persistent goes with its fd
  tun_fds_.clear();
  for (const std::string& name : created_) {
    std::string output;
    run_shell("ip netns del " + name, output);
  }
  created_.clear();
}

LinkSettings WanEmulator::link(std::size_t from, std::size_t to) const {
  if (from >= size() || to >= size()) throw std::out_of_range("WanEmulator::link: no such pair");
  std::lock_guard lock(links_mutex_);
  return links_[from * size() + to];
}

void WanEmulator::set_link(std::size_t from, std::size_t to, const LinkSettings& settings) {
  const std::string name = "link " + std::to_string(from) + ">" + std::to_string(to);
  if (from >= size() || to >= size() || from == to) {
    throw std::out_of_range("WanEmulator::set_link: " + name + " does not exist (there are " +
                            std::to_string(size()) + " namespaces, numbered from 0)");
  }
  validate_link_settings(settings, name);
  if (config_.offload) validate_offload_loss(settings, name);
  std::lock_guard lock(links_mutex_);
  links_[from * size() + to] = settings;
  if (forwarder_) forwarder_->set_link(from * size() + to, settings);
}

std::string WanEmulator::command_in(std::size_t i, const std::string& command) const {
  return "ip netns exec " + namespace_name(i) + " " + command;
}

int WanEmulator::run_in(std::size_t i, const std::string& command, std::string& output) const {
  return run_shell(command_in(i, command), output);
}

void WanEmulator::call_in(std::size_t i, const std::function<void()>& action) const {
  run_in_namespace(namespace_name(i), action);
}

ForwarderStats WanEmulator::stats() const {
  return forwarder_ ? forwarder_->stats() : ForwarderStats{};
}

}  // namespace tessel::wan
