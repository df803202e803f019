#include "noderuntime/transport/link_warmup.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <span>
#include <thread>

#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

struct WarmStream {
  int fd = -1;
  std::string name;  // "<peer> stream k of N"
  uint64_t bytes = 0;
  uint64_t received = 0;
};

void send_warmup(const WarmStream& stream, SteadyTime deadline) {
  static const std::vector<std::byte> chunk(1 << 20);
  uint64_t left = stream.bytes;
  while (left > 0) {
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    send_all(stream.fd, std::span(chunk).first(piece), deadline);
    left -= piece;
  }
}

// Reads every stream's warm-up from the other end, dropping it.
void receive_warmups(std::vector<WarmStream>& streams, SteadyTime deadline) {
  std::vector<std::byte> scratch(1 << 20);
  while (true) {
    std::vector<pollfd> waiting;
    std::vector<WarmStream*> owners;
    for (WarmStream& stream : streams) {
      if (stream.received < stream.bytes) {
        waiting.push_back({stream.fd, POLLIN, 0});
        owners.push_back(&stream);
      }
    }
    if (waiting.empty()) return;
    const int ready = ::poll(waiting.data(), waiting.size(), poll_timeout_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw TransportError(std::string("link warm-up: poll: ") + std::strerror(errno));
    if (ready == 0) {
      throw TransportError(owners.front()->name + ": link warm-up: timed out receiving (" +
                           std::to_string(owners.front()->received) + " of " +
                           std::to_string(owners.front()->bytes) + " bytes)");
    }
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (waiting[i].revents == 0) continue;
      WarmStream& stream = *owners[i];
      const size_t want =
          static_cast<size_t>(std::min<uint64_t>(stream.bytes - stream.received, scratch.size()));
      const ssize_t got = ::recv(stream.fd, scratch.data(), want, 0);
      if (got > 0) {
        stream.received += static_cast<uint64_t>(got);
      } else if (got == 0) {
        throw TransportError(stream.name + ": link warm-up: connection closed");
      } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
        throw TransportError(stream.name + ": link warm-up: recv: " + std::strerror(errno));
      }
    }
  }
}

}  // namespace

uint64_t warmup_bytes_per_stream(const MeshLink& link) {
  return kWarmupWindows * link.plan.buffer_bytes;
}

void warm_up_links(std::vector<MeshLink>& links, const std::vector<int>& peers,
                   const std::vector<std::string>& names, SteadyTime deadline) {
  std::vector<WarmStream> streams;
  for (const int peer : peers) {
    if (peer < 0 || static_cast<size_t>(peer) >= links.size() || links[peer].streams.empty()) {
      throw TransportError("link warm-up: rank " + std::to_string(peer) +
                           " is not a peer with a link");
    }
    const uint64_t bytes = warmup_bytes_per_stream(links[peer]);
    if (bytes == 0) continue;
    const size_t count = links[peer].streams.size();
    for (size_t k = 0; k < count; ++k) {
      const std::string name =
          count == 1 ? names.at(peer)
                     : names.at(peer) + " stream " + std::to_string(k) + " of " +
                           std::to_string(count);
      streams.push_back({links[peer].streams[k].get(), name, bytes, 0});
    }
  }
  if (streams.empty()) return;
  std::vector<std::exception_ptr> errors(streams.size());
  std::vector<std::thread> senders;
  senders.reserve(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    senders.emplace_back([&, i] {
      try {
        send_warmup(streams[i], deadline);
      } catch (const TransportError& e) {
        errors[i] = std::make_exception_ptr(
            TransportError(streams[i].name + ": link warm-up: " + e.what()));
      }
    });
  }
  std::exception_ptr receive_error;
  try {
    receive_warmups(streams, deadline);
  } catch (const TransportError&) {
    receive_error = std::current_exception();
    // Unblock the senders: the link is failing anyway.
    for (const WarmStream& stream : streams) ::shutdown(stream.fd, SHUT_RDWR);
  }
  for (std::thread& sender : senders) sender.join();
  if (receive_error) std::rethrow_exception(receive_error);
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace tessel::transport
