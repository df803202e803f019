#include "tests/chaos/stage_service_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace tessel::testing {
namespace {

sockaddr_in loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// Copies from one socket to the other until either end closes, then shuts both down.
void pump(int from, int to) {
  char buffer[16384];
  while (true) {
    const ssize_t got = ::recv(from, buffer, sizeof buffer, 0);
    if (got <= 0) break;
    ssize_t sent = 0;
    while (sent < got) {
      const ssize_t n = ::send(to, buffer + sent, static_cast<size_t>(got - sent), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += n;
    }
    if (sent < got) break;
  }
  ::shutdown(from, SHUT_RDWR);
  ::shutdown(to, SHUT_RDWR);
}

}  // namespace

int listening_socket(const std::string& address_text) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address_text.c_str(), &address.sin_addr) != 1)
    throw std::runtime_error("stage Service proxy: \"" + address_text +
                             "\" is not an IPv4 address");
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0)
    throw std::runtime_error("stage Service proxy: socket: " + std::string(std::strerror(errno)));
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 64) != 0) {
    const std::string error = std::strerror(errno);
    ::close(listener);
    throw std::runtime_error("stage Service proxy: cannot listen on " + address_text + ": " +
                             error);
  }
  return listener;
}

StageServiceProxy::StageServiceProxy() : StageServiceProxy(listening_socket("127.0.0.1")) {}

StageServiceProxy::StageServiceProxy(int listener) : listener_(listener) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  if (::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = std::strerror(errno);
    ::close(listener_);
    throw std::runtime_error("stage Service proxy: getsockname: " + error);
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

StageServiceProxy::~StageServiceProxy() {
  stopping_ = true;
  ::shutdown(listener_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listener_);
  std::vector<std::thread> pumps;
  {
    std::lock_guard lock(mutex_);
    for (int socket : sockets_) ::shutdown(socket, SHUT_RDWR);
    pumps.swap(pumps_);
  }
  for (std::thread& t : pumps) t.join();
  for (int socket : sockets_) ::close(socket);
}

void StageServiceProxy::set_upstream(std::function<int()> upstream) {
  std::lock_guard lock(mutex_);
  upstream_ = std::move(upstream);
}

void StageServiceProxy::accept_loop() {
  while (!stopping_) {
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (stopping_) return;
      continue;
    }
    // Each connection finds its endpoint on a thread of its own, as kube-proxy's rules apply to
    // every connection at once: one slow lookup (an API list under load) must not hold up the
    // connections behind it, whose clients would give up their handshakes meanwhile.
    std::lock_guard lock(mutex_);
    sockets_.push_back(client);
    pumps_.emplace_back([this, client] { forward(client); });
  }
}

void StageServiceProxy::forward(int client) {
  std::function<int()> upstream;
  {
    std::lock_guard lock(mutex_);
    upstream = upstream_;
  }
  int port = -1;
  try {
    if (upstream) port = upstream();
  } catch (const std::exception&) {
    port = -1;  // the endpoints cannot be read now: as no endpoint
  }
  const int server = port > 0 ? ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
  const sockaddr_in address = loopback(port);
  if (server < 0 ||
      ::connect(server, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    if (server >= 0) ::close(server);
    ::shutdown(client, SHUT_RDWR);  // refused; the descriptor is closed with the proxy
    return;
  }
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {  // the destructor has cut every connection already
      ::close(server);
      return;
    }
    sockets_.push_back(server);
    pumps_.emplace_back(pump, server, client);
  }
  pump(client, server);
}

}  // namespace tessel::testing
