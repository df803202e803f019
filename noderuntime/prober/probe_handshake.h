// The probe protocol's opening: hello (version, client nonce, client name) -> challenge (server
// nonce, server proof) -> response (client proof) -> accepted. Each side checks the other's
// proof before it goes on, so nothing is measured for, or believed from, a peer that does not
// know the shared secret.
#pragma once

#include <string>
#include <string_view>

#include "noderuntime/prober/probe_channel.h"

namespace tessel::prober {

// What a server answers, at once and instead of a challenge, to a connection that comes while
// it serves another session (one at a time): a refusal with this reason, which the client
// turns into ProbeBusy.
inline constexpr std::string_view kBusyRefusal = "busy: measuring another peer's link";

// Throws ProbeBusy when the server is serving another session, ProbeError when the server's
// proof is wrong (wrong secret, or not a prober), it refuses us, or the exchange breaks.
void authenticate_to_server(ProbeChannel& channel, const std::string& secret,
                            const std::string& self_name);

// Returns the client's name (as it says). On a wrong proof it sends a refusal and throws.
std::string authenticate_client(ProbeChannel& channel, const std::string& secret);

}  // namespace tessel::prober
