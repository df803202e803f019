// tessel-wan-emulator: the WAN emulator as a process, for benches and by hand (as root).
// It makes the namespaces and devices, prints one line per namespace
//   namespace <i> <name> <address>
// then "ready", forwards until SIGTERM or SIGINT, prints its counters and removes what it made.
// Exit status: 0 after a clean stop, 2 for bad flags or config, 77 where it cannot run here
// (the message names the missing privilege or device), 1 for any other failure.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "tests/support/wan/wan_emulator.h"

namespace {

using tessel::wan::WanConfig;

// The flags on top of the config file (if any): a flag given overrides the file's value.
WanConfig config_from(int argc, char** argv) {
  CLI::App app{
      "tessel-wan-emulator: network namespaces joined by TUN devices through a "
      "user-space forwarder that delays, rate-limits and drops packets per pair"};
  std::string config_file, netns;
  std::vector<std::string> link_flags;
  WanConfig flags;
  app.add_option("--config", config_file, "a YAML config (see link_settings.h); flags override it");
  auto* namespaces = app.add_option("--namespaces", flags.namespaces, "namespaces to make");
  auto* netns_flag =
      app.add_option("--netns", netns, "comma-separated existing namespaces to use instead");
  auto* prefix = app.add_option("--name-prefix", flags.name_prefix,
                                "names of the namespaces made: <prefix><i> (default twan<pid>-)");
  auto* subnet = app.add_option("--subnet", flags.subnet, "base of the /24 (namespace i: .i+1)");
  auto* tun = app.add_option("--tun-name", flags.tun_name, "the TUN device's name in each");
  auto* mtu = app.add_option("--mtu", flags.mtu, "the TUN devices' MTU");
  auto* offload = app.add_flag("--offload", flags.offload,
                               "TCP segmentation offload: forward 64 KB super-packets (loss 0 or 1 "
                               "only)");
  auto* seed = app.add_option("--seed", flags.seed, "seed of the loss draws");
  auto* delay =
      app.add_option("--delay-ms", flags.default_link.delay_ms, "default one-way delay (ms)");
  auto* rate = app.add_option("--rate-mbit", flags.default_link.rate_mbit,
                              "default rate (Mbit/s; 0 unlimited)");
  auto* loss = app.add_option("--loss", flags.default_link.loss, "default loss probability");
  auto* queue = app.add_option("--queue-ms", flags.default_link.queue_ms,
                               "default queue limit (ms of the rate)");
  app.add_option("--link", link_flags,
                 "a pair's settings: <a>-<b>:key=value,... (both ways) or <a>><b>:... (one way); "
                 "keys delay_ms, rate_mbit, loss, queue_ms; repeatable");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  WanConfig config = config_file.empty() ? WanConfig{} : tessel::wan::load_wan_config(config_file);
  if (*namespaces) config.namespaces = flags.namespaces;
  if (*netns_flag) {
    config.netns.clear();
    std::stringstream names(netns);
    for (std::string name; std::getline(names, name, ',');) config.netns.push_back(name);
  }
  if (*prefix) config.name_prefix = flags.name_prefix;
  if (*subnet) config.subnet = flags.subnet;
  if (*tun) config.tun_name = flags.tun_name;
  if (*mtu) config.mtu = flags.mtu;
  if (*offload) config.offload = flags.offload;
  if (*seed) config.seed = flags.seed;
  if (*delay) config.default_link.delay_ms = flags.default_link.delay_ms;
  if (*rate) config.default_link.rate_mbit = flags.default_link.rate_mbit;
  if (*loss) config.default_link.loss = flags.default_link.loss;
  if (*queue) config.default_link.queue_ms = flags.default_link.queue_ms;
  for (const std::string& text : link_flags) {
    config.links.push_back(tessel::wan::parse_link_override(text));
  }
  tessel::wan::validate_wan_config(config);
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals before any thread starts, then wait for one of them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  WanConfig config;
  try {
    config = config_from(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "tessel-wan-emulator: " << e.what() << "\n";
    return 2;
  }
  std::unique_ptr<tessel::wan::WanEmulator> wan;
  try {
    wan = tessel::wan::WanEmulator::start(config);
  } catch (const tessel::wan::WanUnavailable& e) {
    std::cerr << "tessel-wan-emulator: cannot run here: " << e.what() << "\n";
    return 77;
  } catch (const std::invalid_argument& e) {
    std::cerr << "tessel-wan-emulator: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tessel-wan-emulator: " << e.what() << "\n";
    return 1;
  }
  for (std::size_t i = 0; i < wan->size(); ++i) {
    std::printf("namespace %zu %s %s\n", i, wan->namespace_name(i).c_str(),
                wan->address(i).c_str());
  }
  std::printf("ready\n");
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  wan->stop();
  const tessel::wan::ForwarderStats s = wan->stats();
  std::printf(
      "stopped by signal %d: packets in %llu, out %llu (%llu bytes), dropped: queue full %llu, "
      "loss %llu, unroutable %llu, write errors %llu\n",
      signal, static_cast<unsigned long long>(s.packets_in),
      static_cast<unsigned long long>(s.packets_out), static_cast<unsigned long long>(s.bytes_out),
      static_cast<unsigned long long>(s.dropped_queue),
      static_cast<unsigned long long>(s.dropped_loss),
      static_cast<unsigned long long>(s.dropped_unroutable),
      static_cast<unsigned long long>(s.write_errors));
  return 0;
}
