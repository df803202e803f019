// The hub chart's stage Service, as kube-proxy makes it: one stable address that the stage pods
// dial (stageService.advertise), forwarding each TCP connection to the replica whose Pod carries
// tessel.dev/stage-service=serving (the leader labels its own Pod; the Service selects it). The
// operator e2e advertises each replica's own address instead, which is enough while one replica
// lives; when leadership moves, the pods of a job placed by the old leader keep dialling the
// Service, and only a Service follows the leader.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::testing {

// A TCP socket listening on `address` (IPv4), port chosen by the kernel, in the network namespace
// of the calling thread; throws std::runtime_error naming the address.
int listening_socket(const std::string& address);

class StageServiceProxy {
 public:
  // Listens on a free loopback port at once; connections accepted before set_upstream() (or while
  // it answers -1: no endpoint) are closed, as a Service without endpoints refuses them.
  StageServiceProxy();
  // The same on `listener`, a listening TCP socket that the proxy takes over (e.g. one made
  // inside another network namespace by listening_socket(); the proxy's upstream connections
  // are made on this process's loopback all the same).
  explicit StageServiceProxy(int listener);
  ~StageServiceProxy();  // stops accepting and cuts every connection
  StageServiceProxy(const StageServiceProxy&) = delete;
  StageServiceProxy& operator=(const StageServiceProxy&) = delete;

  int port() const { return port_; }
  // The loopback port of the serving replica, asked once per connection.
  void set_upstream(std::function<int()> upstream);

 private:
  void accept_loop();
  void forward(int client);

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_ = false;
  std::mutex mutex_;
  std::function<int()> upstream_;   // under mutex_
  std::vector<int> sockets_;        // open connections, under mutex_
  std::vector<std::thread> pumps_;  // under mutex_
  std::thread acceptor_;
};

}  // namespace tessel::testing
