#include "dlaunch/munge_auth.hpp"

#include <munge.h>

#include <cstdlib>
#include <memory>

namespace dlaunch::group {
namespace {

const char* const kNoMunge = "is munged running on this node? (systemctl status munge)";

}  // namespace

Result<std::string> munge_credential(const std::string& payload) {
    char* cred = nullptr;
    munge_err_t e = munge_encode(&cred, nullptr, payload.data(), static_cast<int>(payload.size()));
    std::unique_ptr<char, decltype(&std::free)> owned(cred, &std::free);
    if (e != EMUNGE_SUCCESS)
        return Error{std::string("group: cannot make a MUNGE credential: ") + munge_strerror(e), kNoMunge};
    return std::string(cred);
}

Result<Sender> munge_verify(const std::string& credential) {
    void* buf = nullptr;
    int len = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    munge_err_t e = munge_decode(credential.c_str(), nullptr, &buf, &len, &uid, &gid);
    std::unique_ptr<void, decltype(&std::free)> owned(buf, &std::free);
    if (e != EMUNGE_SUCCESS)
        return Error{std::string("group: a MUNGE credential is not valid: ") + munge_strerror(e),
                     e == EMUNGE_SOCKET ? kNoMunge : "only the job's own agents may join its group"};
    Sender s;
    s.uid = static_cast<uint32_t>(uid);
    if (buf != nullptr && len > 0) s.payload.assign(static_cast<const char*>(buf), static_cast<size_t>(len));
    return s;
}

}  // namespace dlaunch::group
