#include "dlaunch/group_auth.hpp"

#include <unistd.h>

#include "dlaunch/munge_auth.hpp"
#include "dlaunch/rdzv_auth.hpp"

namespace dlaunch {
namespace {

// What a secret's proof covers: everything the hello says about its sender.
std::string signed_text(const group::Hello& hello) {
    return "dlaunch-group " + hello.run_id + " " + std::to_string(hello.member) + " " + hello.host + " " +
           std::to_string(hello.attempt);
}

}  // namespace

GroupAuth munge_group_auth() {
    return {[](const group::Hello& hello) { return group::munge_credential(hello.run_id); },
            [](const group::Hello& hello) { return group::munge_verify(hello.credential); }};
}

GroupAuth secret_group_auth(const std::string& secret) {
    auto sign = [secret](const group::Hello& hello) -> Result<std::string> {
        return rdzv_auth::proof(secret, hello.nonce, signed_text(hello));
    };
    auto verify = [secret](const group::Hello& hello) -> Result<group::Sender> {
        if (auto why = rdzv_auth::check(secret, hello.nonce, signed_text(hello), hello.credential); !why.empty())
            return Error{"group: " + why, "only the run's own agents may join its group"};
        // The secret stands for the user who started the run.
        return group::Sender{static_cast<uint32_t>(::getuid()), hello.run_id};
    };
    return {sign, verify};
}

rdzv_auth::Proofs munge_rendezvous_proofs() {
    auto prove = [](const std::string& nonce, const std::string& text) -> Result<std::string> {
        auto digest = rdzv_auth::digest(nonce, text);
        if (!digest) return Error::in("rdzv", digest.error().what, digest.error().hint);
        auto cred = group::munge_credential(*digest);
        if (!cred) return cred.error().told_as("rdzv");
        return cred;
    };
    auto check = [](const std::string& nonce, const std::string& text, const std::string& given) -> std::string {
        auto sender = group::munge_verify(given);
        if (!sender) return sender.error().problem();
        if (sender->uid != ::getuid())
            return "its MUNGE credential is of uid " + std::to_string(sender->uid) + ", this job's user is uid " +
                   std::to_string(::getuid());
        auto digest = rdzv_auth::digest(nonce, text);
        if (!digest) return "cannot check its MUNGE credential (" + digest.error().describe() + ")";
        if (sender->payload != *digest) return "its MUNGE credential was made for another message";
        return "";
    };
    return {prove, check, false, "a MUNGE credential of the job's user"};
}

}  // namespace dlaunch
