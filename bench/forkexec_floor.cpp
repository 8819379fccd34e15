// The floor for launch overhead: fork + exec N copies of a program and wait for all of them.
// No shell, no pipes, no environment rewriting -- the least any launcher can do.
//
// Built by bench/launch_overhead.sh (g++ -O2 into a temporary directory; never committed):
//   g++ -O2 -o forkexec_floor bench/forkexec_floor.cpp
// Usage: forkexec_floor N PROGRAM [ARGS...]     e.g. forkexec_floor 8 /bin/true
// Exit status: 0 when all N children exited 0, else 1.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s N PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    const int n = std::atoi(argv[1]);
    for (int i = 0; i < n; ++i) {
        pid_t pid = ::fork();
        if (pid < 0) {
            std::perror("fork");
            return 1;
        }
        if (pid == 0) {
            ::execv(argv[2], argv + 2);
            _exit(127);
        }
    }
    int failed = 0;
    for (int i = 0; i < n; ++i) {
        int status = 0;
        if (::wait(&status) < 0) {
            if (errno == EINTR) {
                --i;
                continue;
            }
            std::perror("wait");
            return 1;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    return failed;
}
