// How the agents of a group prove who they are when a member says hello to the leader: under Slurm with a
// MUNGE credential (munge_auth.hpp: the job's user, no replay), by hand with the run's secret
// (DLAUNCH_RDZV_SECRET, rdzv_auth.hpp: an HMAC of the hello bound to the nonce of the leader's welcome to
// that connection, so a hello cannot be changed, made without the secret, or played again).
#pragma once

#include <functional>
#include <string>

#include "dlaunch/group_protocol.hpp"
#include "dlaunch/rdzv_auth.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

struct GroupAuth {
    std::function<Result<std::string>(const group::Hello&)> sign;      // the hello's credential
    std::function<Result<group::Sender>(const group::Hello&)> verify;  // who made it, when it holds
};

GroupAuth munge_group_auth();
// "" for no secret: anyone who reaches the leader's port may join (the rendezvous warned already).
GroupAuth secret_group_auth(const std::string& secret);

// The node rendezvous's proofs under Slurm: a MUNGE credential of the job's user carrying the digest of what
// is proved, bound to the reader's nonce (munged refuses to decode one credential twice).
rdzv_auth::Proofs munge_rendezvous_proofs();

}  // namespace dlaunch
