// Nettle's functions that dlaunch uses (the rendezvous's HMAC-SHA256 and SHA-256, etcd's base64), from
// libnettle opened on first use (dlaunch/shared_library.hpp). Linked, libnettle would cost every start of every
// program (dlaunch, each dlaunch-mpi rank, the SPANK plugin in each slurmstepd) its symbol bindings and the
// CPU-feature probe of its constructor (bench/README.md); a one-node run uses none of it (with a run secret the
// agent opens it at its start, agent_main.cpp).
#pragma once

#include <nettle/base64.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

#include "dlaunch/result.hpp"

namespace dlaunch {

struct NettleApi {
    decltype(&nettle_hmac_sha256_set_key) hmac256_set_key = nullptr;
    decltype(&nettle_hmac_sha256_update) hmac256_update = nullptr;
    decltype(&nettle_hmac_sha256_digest) hmac256_digest = nullptr;
    decltype(&nettle_sha256_init) sha_init = nullptr;
    decltype(&nettle_sha256_update) sha_update = nullptr;
    decltype(&nettle_sha256_digest) sha_digest = nullptr;
    decltype(&nettle_memeql_sec) equal_sec = nullptr;
    decltype(&nettle_base64_encode_raw) b64_encode_raw = nullptr;
    decltype(&nettle_base64_decode_init) b64_decode_init = nullptr;
    decltype(&nettle_base64_decode_update) b64_decode_update = nullptr;
    decltype(&nettle_base64_decode_final) b64_decode_final = nullptr;
};

// The functions, loaded at the first call; an Error saying what to install when libnettle cannot be loaded.
Result<const NettleApi*> nettle_api();

}  // namespace dlaunch
