// The probe protocol's opening: hello (version, client nonce, [session ticket,] client name) ->
// challenge (server nonce, server proof) -> response (client proof) -> accepted ([session
// ticket, joins offered]). Each side checks the other's proof before it goes on, so nothing is
// measured for, or believed from, a peer that does not know the shared secret.
//
// Version 2 (probe_channel.h): a session's bulk phase may run over several connections. The
// first connection's hello carries a zero ticket and opens a session; the server's accepted
// frame gives it a random ticket and the number of connections that may join it. A joining
// connection authenticates the same way, its hello carrying that ticket. The ticket only says
// which session a connection belongs to: every connection proves the secret on its own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "noderuntime/prober/probe_auth.h"
#include "noderuntime/prober/probe_channel.h"

namespace tessel::prober {

// What a server answers, at once and instead of a challenge, to a connection that comes while
// it serves another session (one at a time) and is not joining it: a refusal with this reason,
// which the client turns into ProbeBusy.
inline constexpr std::string_view kBusyRefusal = "busy: measuring another peer's link";

using SessionTicket = std::array<std::byte, kTicketBytes>;

// A hello, as the server reads it.
struct ProbeHello {
  uint32_t version = kProtocolVersion;
  Nonce nonce{};
  std::optional<SessionTicket> join;  // version 2, non-zero ticket: the session it joins
  std::string name;                   // as the client says (non-printable bytes shown as '?')
};

// What the server's accepted frame offers the client. A version 1 server offers nothing.
struct SessionOffer {
  uint32_t version = kOldestProtocolVersion;  // the version the session speaks
  SessionTicket ticket{};                     // version 2: for connections joining this session
  int joins = 0;                              // connections that may join it (bulk phase)
};

// How a client opens a connection: the version it speaks, and the session it joins (version 2).
struct HelloOptions {
  uint32_t version = kProtocolVersion;
  std::optional<SessionTicket> join;
};

// Throws ProbeBusy when the server is serving another session, ProbeVersionRefused when it does
// not speak `hello.version`, ProbeError when the server's proof is wrong (wrong secret, or not a
// prober), it refuses us, or the exchange breaks.
SessionOffer authenticate_to_server(ProbeChannel& channel, const std::string& secret,
                                    const std::string& self_name, const HelloOptions& hello = {});

// The server's side, in two steps so that a busy server can read a hello (is it joining the
// session in progress?) before it decides. read_hello throws ProbeError for a malformed hello;
// for a version this server does not speak it sends the refusal first.
ProbeHello read_hello(ProbeChannel& channel);
// Completes the opening of `hello`: challenge, response, accepted (with `offer` to a version 2
// client). On a wrong proof it sends a refusal and throws.
void authenticate_client(ProbeChannel& channel, const std::string& secret, const ProbeHello& hello,
                         const SessionOffer& offer);
// Both steps for one connection that opens no session joins may join (offers none); returns the
// client's name.
std::string authenticate_client(ProbeChannel& channel, const std::string& secret);

// A ticket from the system's cryptographic random source, never all zero.
SessionTicket random_ticket();

}  // namespace tessel::prober
