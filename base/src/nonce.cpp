#include "dlaunch/nonce.hpp"

#include <sys/random.h>

#include <cerrno>
#include <stdexcept>
#include <string_view>

#include "dlaunch/text.hpp"

namespace dlaunch {

std::string random_bytes(size_t n) {
    std::string bytes(n, '\0');
    ssize_t got = -1;
    while ((got = ::getrandom(bytes.data(), n, 0)) < 0 && errno == EINTR) {
    }
    if (got != static_cast<ssize_t>(n)) throw std::runtime_error("the kernel gave no random bytes");
    return bytes;
}

std::string fresh_nonce() {
    return hex_of(random_bytes(16));
}

}  // namespace dlaunch
