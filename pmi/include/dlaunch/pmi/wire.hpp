// The PMI "simple" wire protocols that MPICH's Hydra, Slurm's mpi/pmi2 plugin and Flux serve over PMI_FD or
// PMI_PORT, as pure functions: commands formatted, replies parsed, PMI_process_mapping decoded. Slurm's
// client libraries (libpmi0, libpmi2-0) wait on the server without a bound and exist only where Slurm is
// installed; this one small client serves Hydra, Slurm and Flux alike, every wait bounded (client.hpp).
//
// PMI-1: one line per message, "cmd=NAME key=value key=value\n", fields separated by spaces.
// PMI-2: a 6-byte decimal length, padded on the left (Slurm reads no other), then "cmd=NAME;key=value;...;",
//   after the client asked for it in PMI-1's words ("cmd=init pmi_version=2 pmi_subversion=0").
// Caveats:
// - Neither protocol escapes reliably: Hydra cuts a PMI-1 value at a space and a PMI-2 value at ';' (";;"
//   is not understood). Values dlaunch puts are percent-encoded (encode_value) so they never hold either.
// - PMI_process_mapping "(vector,(START,NODES,PER_NODE),...)" repeats from its start when it covers fewer
//   ranks than the job has (Hydra gives "(vector,(0,1,1))" for two ranks on one host).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlaunch/result.hpp"

namespace dlaunch::pmi {

enum class Version { One, Two };

// A message's fields in order; the first is always ("cmd", NAME).
using Fields = std::vector<std::pair<std::string, std::string>>;

// The longest message either side may send; a longer one is refused (a server that floods is not waited on).
inline constexpr size_t kMaxMessage = 64 * 1024;
// The most ranks a job may have: a size beyond it is a server's mistake, not a job to plan.
inline constexpr int kMaxRanks = 1 << 20;

// "cmd=NAME k=v ...\n" (PMI-1) or the length-prefixed "cmd=NAME;k=v;...;" (PMI-2).
std::string format(Version version, const std::string& cmd, const Fields& args);

// One PMI-1 line (without its '\n') or one PMI-2 body (without its length) as fields; an Error naming the
// text when a field has no '=' or the first is not cmd=.
Result<Fields> parse(Version version, std::string_view text);

// The value of `key`; nullopt when absent.
std::optional<std::string> field(const Fields& fields, std::string_view key);

// `text` as a whole decimal number (no sign but '-', no spaces, no overflow); nullopt otherwise.
std::optional<int> whole_number(std::string_view text);
// The value of `key` as whole_number() reads it; nullopt when absent or not a number.
std::optional<int> number_field(const Fields& fields, std::string_view key);

// `value` with every byte outside [A-Za-z0-9._:,/+-] as %XX; decode_value() undoes it (an Error on a bad %).
std::string encode_value(std::string_view value);
Result<std::string> decode_value(std::string_view text);

// The node index of each of `size` ranks from PMI_process_mapping; an Error quoting the text when it is not
// a vector of (START,NODES,PER_NODE) triples that covers ranks.
Result<std::vector<int>> decode_process_mapping(std::string_view text, int size);

// `text` cut to `limit` bytes with every byte outside printable ASCII as \xNN, for quoting a peer's words.
std::string printable(std::string_view text, size_t limit = 200);

}  // namespace dlaunch::pmi
