// A thread beside the agent's main thread, started with every signal blocked.
//
// The agent takes its signals (SIGCHLD, the stop signals) through the main thread's signalfd, which sees
// a signal only while no thread of the process leaves it unblocked: the kernel gives a process-directed
// signal to any thread that does not block it. A thread started with the main thread's usual mask would
// take a worker's SIGCHLD (its default action: discard) and the executor would wait for that worker for
// ever. Every thread the agent starts goes through here.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace dlaunch {

template <typename F, typename... Args>
std::thread side_thread(F&& f, Args&&... args) {
    struct AllBlocked {  // the new thread inherits the mask it is made with; the caller gets its own back
        sigset_t before;
        AllBlocked() {
            sigset_t all;
            sigfillset(&all);
            ::pthread_sigmask(SIG_BLOCK, &all, &before);
        }
        ~AllBlocked() { ::pthread_sigmask(SIG_SETMASK, &before, nullptr); }
    } blocked;
    return std::thread(std::forward<F>(f), std::forward<Args>(args)...);
}

}  // namespace dlaunch
