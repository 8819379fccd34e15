#include "dlaunch/munge_auth.hpp"

#include <munge.h>

#include <cstdlib>
#include <memory>

#include "dlaunch/shared_library.hpp"

namespace dlaunch::group {
namespace {

const char* const kNoMunge = "is munged running on this node? (systemctl status munge)";

// libmunge, opened on first use: only agents under Slurm (and the doctor there) make or check credentials.
struct Munge {
    decltype(&::munge_encode) encode = nullptr;
    decltype(&::munge_decode) decode = nullptr;
    decltype(&::munge_strerror) strerror = nullptr;
    std::string error;  // why it cannot be used ("" when it can)
};

const Munge& munge() {
    static const Munge m = [] {
        static SharedLibrary so(DLAUNCH_LIBMUNGE_SONAME);
        Munge f;
        so.bind(f.encode, "munge_encode");
        so.bind(f.decode, "munge_decode");
        so.bind(f.strerror, "munge_strerror");
        f.error = so.error();
        return f;
    }();
    return m;
}

Error without_munge() {
    return Error::in("group", "cannot use MUNGE: " + munge().error,
                     "install MUNGE's library (apt-get install libmunge2)");
}

}  // namespace

Result<std::string> munge_credential(const std::string& payload) {
    const Munge& m = munge();
    if (!m.error.empty()) return without_munge();
    char* cred = nullptr;
    munge_err_t e = m.encode(&cred, nullptr, payload.data(), static_cast<int>(payload.size()));
    std::unique_ptr<char, decltype(&std::free)> owned(cred, &std::free);
    if (e != EMUNGE_SUCCESS)
        return Error::in("group", std::string("cannot make a MUNGE credential: ") + m.strerror(e), kNoMunge);
    return std::string(cred);
}

Result<Sender> munge_verify(const std::string& credential) {
    const Munge& m = munge();
    if (!m.error.empty()) return without_munge();
    void* buf = nullptr;
    int len = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    munge_err_t e = m.decode(credential.c_str(), nullptr, &buf, &len, &uid, &gid);
    std::unique_ptr<void, decltype(&std::free)> owned(buf, &std::free);
    if (e != EMUNGE_SUCCESS)
        return Error::in("group", std::string("a MUNGE credential is not valid: ") + m.strerror(e),
                         e == EMUNGE_SOCKET ? kNoMunge : "only the job's own agents may join its group");
    Sender s;
    s.uid = static_cast<uint32_t>(uid);
    if (buf != nullptr && len > 0) s.payload.assign(static_cast<const char*>(buf), static_cast<size_t>(len));
    return s;
}

}  // namespace dlaunch::group
