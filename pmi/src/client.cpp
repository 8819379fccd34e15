#include "dlaunch/pmi/client.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dlaunch/clock.hpp"

namespace dlaunch::pmi {
namespace {

// PMI_PORT is "HOST:PORT"; a bounded non-blocking connect.
Result<Fd> connect_port(const std::string& where, double seconds) {
    auto colon = where.rfind(':');
    auto fail = [&](const std::string& why) {
        return Error{"job: pmi: PMI_PORT='" + where + "': " + why,
                     "start dlaunch-mpi directly under mpiexec (not from a script that changes PMI_PORT)"};
    };
    if (colon == std::string::npos || colon == 0) return fail("not HOST:PORT");
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(where.substr(0, colon).c_str(), where.substr(colon + 1).c_str(), &hints, &found); rc)
        return fail(::gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(found, ::freeaddrinfo);
    Fd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd.get() < 0) return fail(std::string("socket: ") + std::strerror(errno));
    if (::connect(fd.get(), found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS)
        return fail(std::string("connect: ") + std::strerror(errno));
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(seconds * 1000)) != 1) return fail("no connection within the reply bound");
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
        return fail(std::string("connect: ") + std::strerror(err));
    return fd;
}

// PMI_FD names a descriptor the launcher left open; anything but a stream socket is refused.
Result<Fd> inherited_fd(const std::string& text) {
    auto fd = whole_number(text);
    struct stat st {};
    if (!fd || *fd < 0 || ::fstat(*fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return Error{"job: pmi: PMI_FD='" + text + "' is not an open socket of this process",
                     "start dlaunch-mpi directly under mpiexec, not from a script that closes descriptors"};
    ::fcntl(*fd, F_SETFD, FD_CLOEXEC);
    ::fcntl(*fd, F_SETFL, ::fcntl(*fd, F_GETFL) | O_NONBLOCK);
    return Fd(*fd);
}

std::string seconds_text(double seconds) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", seconds);
    return text;
}

}  // namespace

bool offered(const EnvMap& env) {
    return env.contains("PMI_FD") || (env.contains("PMI_PORT") && env.contains("PMI_ID"));
}

Result<Version> version_for(const EnvMap& env) {
    if (auto it = env.find("DLAUNCH_PMI_VERSION"); it != env.end()) {
        if (it->second == "1") return Version::One;
        if (it->second == "2") return Version::Two;
        return Error{"job: DLAUNCH_PMI_VERSION='" + it->second + "' is neither 1 nor 2",
                     "unset it to let dlaunch-mpi choose, or set 1 (PMI-1) or 2 (PMI-2)"};
    }
    return str_var(env, "SLURM_MPI_TYPE") == "pmi2" ? Version::Two : Version::One;
}

std::string source_name(Version version) {
    return version == Version::One ? "pmi-1" : "pmi-2";
}

Client::Client(Fd fd, Version version, double reply_seconds)
    : fd_(std::move(fd)), version_(version), reply_seconds_(reply_seconds) {}

Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::connect_if_available(const EnvMap& env, double reply_seconds) {
    if (!offered(env)) return std::unique_ptr<Client>();
    auto version = version_for(env);
    if (!version) return version.error();
    auto fd = env.contains("PMI_FD") ? inherited_fd(env.at("PMI_FD")) : connect_port(env.at("PMI_PORT"), reply_seconds);
    if (!fd) return fd.error();
    std::unique_ptr<Client> client(new Client(std::move(*fd), *version, reply_seconds));
    if (auto s = client->open(env); !s) {
        client->fd_.reset();  // not initialised: nothing to finalize, and no reply to wait for
        return s.error();
    }
    return client;
}

Error Client::failure(const std::string& what, const std::string& hint) const {
    return Error{"job: " + source_name(version_) + ": " + what, hint};
}

Result<Fields> Client::receive(const std::string& reply, double seconds) const {
    const auto deadline = Clock::now() + seconds_ms(seconds);
    auto complete = [&]() -> std::optional<std::string> {
        if (version_ == Version::One) {
            auto nl = pending_.find('\n');
            if (nl == std::string::npos) return std::nullopt;
            std::string line = pending_.substr(0, nl);
            pending_.erase(0, nl + 1);
            return line;
        }
        if (pending_.size() < 6) return std::nullopt;
        std::string head = pending_.substr(0, 6);  // padded on either side
        head.erase(0, head.find_first_not_of(' '));
        head.erase(head.find_last_not_of(' ') + 1);
        auto length = whole_number(head);
        if (!length || *length < 0 || static_cast<size_t>(*length) > kMaxMessage) return std::string("\x01");
        if (pending_.size() < 6 + static_cast<size_t>(*length)) return std::nullopt;
        std::string body = pending_.substr(6, static_cast<size_t>(*length));
        pending_.erase(0, 6 + static_cast<size_t>(*length));
        return body;
    };
    while (true) {
        if (auto text = complete()) {
            if (*text == "\x01")
                return failure("the server sent a bad length header '" + printable(pending_.substr(0, 6)) + "'",
                               "the server does not speak PMI-2: unset DLAUNCH_PMI_VERSION, or set it to 1");
            auto fields = parse(version_, *text);
            if (!fields) return failure(fields.error().what.substr(5), fields.error().hint);
            if (fields->front().second != reply)
                return failure(
                    "the server answered '" + printable(fields->front().second, 60) + "' where '" + reply + "' was due",
                    "start dlaunch-mpi directly under the launcher; nothing else may use its PMI "
                    "connection");
            return fields;
        }
        if (pending_.size() > kMaxMessage)
            return failure("the server sent an over-long message",
                           "the PMI server is not one dlaunch-mpi knows; report it with the launcher's name");
        pollfd p{fd_.get(), POLLIN, 0};
        int rc = ::poll(&p, 1, ms_left(deadline));
        if (rc < 0 && errno == EINTR) continue;
        if (rc == 0 && (reply == "barrier_out" || reply == "kvs-fence-response"))
            return failure("no '" + reply + "' from the server within " + seconds_text(seconds) + " s",
                           "a rank that never reached dlaunch-mpi holds the others back; check every rank started "
                           "(raise --fence-timeout for slow starts)");
        if (rc == 0)
            return failure("no '" + reply + "' from the server within " + seconds_text(seconds) + " s",
                           "the launcher's PMI server does not answer; see the launcher's messages");
        char buf[4096];
        ssize_t n = rc < 0 ? -1 : ::recv(fd_.get(), buf, sizeof buf, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0)
            return failure("the server closed the connection while '" + reply + "' was due",
                           "the launcher ended the job: see its messages, and those of the other ranks");
        pending_.append(buf, static_cast<size_t>(n));
    }
}

Result<Fields> Client::call(const std::string& cmd, const Fields& args, const std::string& reply,
                            double seconds) const {
    const std::string text = format(version_, cmd, args);
    const auto deadline = Clock::now() + seconds_ms(reply_seconds_);
    for (size_t done = 0; done < text.size();) {
        pollfd p{fd_.get(), POLLOUT, 0};
        if (::poll(&p, 1, ms_left(deadline)) != 1)
            return failure("the server does not read '" + cmd + "'", "see the launcher's messages");
        ssize_t n = ::send(fd_.get(), text.data() + done, text.size() - done, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0)
            return failure(std::string("sending '") + cmd + "': " + std::strerror(errno),
                           "the launcher ended the job: see its messages");
        done += static_cast<size_t>(n);
    }
    auto fields = receive(reply, seconds);
    if (!fields) return fields;
    if (auto rc = field(*fields, "rc"); rc && *rc != "0")
        return failure(
            "'" + cmd + "' failed: rc=" + printable(*rc, 20) + " " + printable(field(*fields, "msg").value_or(""), 120),
            "see the launcher's messages");
    return fields;
}

}  // namespace dlaunch::pmi
