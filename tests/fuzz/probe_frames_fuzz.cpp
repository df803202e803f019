// What a peer prober sends (noderuntime/prober/probe_channel.h, probe_handshake.h), delivered
// through a real socket (a socketpair; the test's end is closed for writing once the input is
// in, so that every read ends). The first byte picks whose end the input plays:
//   0: a client, read by a server: authenticate_client (the hello's version, nonce, ticket and
//      name, the response), as a session begins;
//   1: a server, read by a client: authenticate_to_server (the challenge, a refusal, busy);
//   2: any stream of frames, read one by one by ProbeChannel::receive until it throws.
// The rest of the input is the stream. A ProbeError (ProbeRefused, ProbeBusy) is the refusal.
// Every frame received must respect its type's payload limit, and every 12-byte header that
// decodes must encode back to the same bytes.
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_error.h"
#include "noderuntime/prober/probe_handshake.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace tessel::prober;
using tessel::transport::UniqueFd;

const std::string kSecret = "fuzz-probe-shared-secret-0123456789";

void check_header_round_trip(const uint8_t* data, size_t size) {
  if (size < kFrameHeaderBytes) return;
  std::array<std::byte, kFrameHeaderBytes> raw;
  std::memcpy(raw.data(), data, kFrameHeaderBytes);
  FrameHeader header;
  try {
    header = decode_frame_header(raw);
  } catch (const ProbeError&) {
    return;
  }
  if (encode_frame_header(header) != raw) {
    tessel::fuzz::finding("a decoded frame header does not encode back to its bytes");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 3;
  ++data;
  --size;
  check_header_round_trip(data, size);

  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  UniqueFd peer(fds[0]);
  // The whole input fits the socket's buffer (libFuzzer's -max_len is far below it).
  if (size > 0 && ::send(peer.get(), data, size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  ::shutdown(peer.get(), SHUT_WR);
  ProbeChannel channel(UniqueFd(fds[1]), "fuzz peer", std::chrono::milliseconds(2000));
  try {
    if (mode == 0) {
      authenticate_client(channel, kSecret);
      tessel::fuzz::finding("a client that cannot know the nonce was authenticated");
    } else if (mode == 1) {
      authenticate_to_server(channel, kSecret, "fuzz-node");
      tessel::fuzz::finding("a server that cannot know the nonce was authenticated");
    } else {
      std::vector<std::byte> payload;
      while (true) {
        const FrameType type = channel.receive(payload);
        if (payload.size() > max_payload_bytes(type)) {
          tessel::fuzz::finding(std::string("a ") + frame_type_name(type) + " frame of " +
                                std::to_string(payload.size()) + " bytes was received");
        }
      }
    }
  } catch (const ProbeError&) {
  }
  return 0;
}
