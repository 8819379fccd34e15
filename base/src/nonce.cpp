#include "dlaunch/nonce.hpp"

#include <sys/random.h>

#include <cerrno>
#include <stdexcept>
#include <string_view>

#include "dlaunch/text.hpp"

namespace dlaunch {

std::string fresh_nonce() {
    char bytes[16];
    ssize_t got = -1;
    while ((got = ::getrandom(bytes, sizeof bytes, 0)) < 0 && errno == EINTR) {
    }
    if (got != static_cast<ssize_t>(sizeof bytes))
        throw std::runtime_error("the kernel gave no random bytes for a nonce");
    return hex_of(std::string_view(bytes, sizeof bytes));
}

}  // namespace dlaunch
