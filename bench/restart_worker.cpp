// Worker for bench/restart_latency.sh. Built by that script (g++ -O2 into a temporary directory).
//
// Worker for bench/group_restart.py too (several nodes: $BENCH_LOG on a shared directory).
//
// On start, appends one line to $BENCH_LOG with a single O_APPEND write:
//     start <CLOCK_MONOTONIC ns> <TORCHELASTIC_RESTART_COUNT> <LOCAL_RANK> <pid> <RANK>
// Then, on attempt 0 (TORCHELASTIC_RESTART_COUNT=0):
//     the failing rank (global rank $BENCH_FAIL_RANK when set, -1 for none; else local rank 0)
//     waits until all $BENCH_NPROC ranks of attempt 0 have logged their start
//     (so that the failure hits a fully started group), sleeps $BENCH_SETTLE_MS (default 100),
//     appends  fail <CLOCK_MONOTONIC ns>  and exits 1;
//     every other rank blocks in pause() with SIGTERM at its default action, so it dies at once
//     when the launcher stops the group.
// On any later attempt every rank exits 0: at once, or, with $BENCH_HOLD (a FIFO the bench holds open for
// writing), once the bench closes it, so that the ranks that started first do not end (and their agents with
// them) while the others still start, as training would not.
//
// CLOCK_MONOTONIC is one clock for all processes on a machine, so timestamps from different
// workers can be subtracted. Restart latency = max(start ns of attempt 1) - fail ns.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {

long long now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

void append(const char* path, const std::string& line) {
    int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::perror(path);
        _exit(3);
    }
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(3);
    ::close(fd);
}

int count_attempt0_starts(const char* path) {
    FILE* f = std::fopen(path, "r");
    if (!f) return 0;
    char kind[16];
    long long ns;
    int restart = -1, n = 0;
    char line[256];
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "%15s %lld %d", kind, &ns, &restart) == 3 && std::strcmp(kind, "start") == 0 &&
            restart == 0)
            ++n;
    std::fclose(f);
    return n;
}

}  // namespace

int main() {
    const long long t0 = now_ns();
    const char* log = std::getenv("BENCH_LOG");
    if (!log) {
        std::fprintf(stderr, "restart_worker: BENCH_LOG is not set\n");
        return 2;
    }
    const int restart = env_int("TORCHELASTIC_RESTART_COUNT", -1);
    const int local_rank = env_int("LOCAL_RANK", -1);
    const int rank = env_int("RANK", -1);
    const char* hold = restart != 0 ? std::getenv("BENCH_HOLD") : nullptr;
    const int held = hold ? ::open(hold, O_RDONLY | O_CLOEXEC) : -1;  // at once: the bench is a writer
    if (hold && held < 0) {
        std::perror(hold);
        return 2;
    }
    append(log, "start " + std::to_string(t0) + " " + std::to_string(restart) + " " + std::to_string(local_rank) + " " +
                    std::to_string(::getpid()) + " " + std::to_string(rank) + "\n");
    if (restart != 0) {
        char byte;
        for (ssize_t n = 1; held >= 0 && (n > 0 || (n < 0 && errno == EINTR));) n = ::read(held, &byte, 1);
        return 0;  // the bench closed its end (or the FIFO failed: the start was logged either way)
    }

    ::signal(SIGTERM, SIG_DFL);
    const bool fails = std::getenv("BENCH_FAIL_RANK") ? rank == env_int("BENCH_FAIL_RANK", -1) : local_rank == 0;
    if (fails) {
        const int nproc = env_int("BENCH_NPROC", 1);
        const long long deadline = now_ns() + 20LL * 1000000000LL;
        while (count_attempt0_starts(log) < nproc && now_ns() < deadline) ::usleep(1000);
        ::usleep(static_cast<useconds_t>(env_int("BENCH_SETTLE_MS", 100)) * 1000);
        append(log, "fail " + std::to_string(now_ns()) + "\n");
        return 1;
    }
    for (;;) ::pause();
}
