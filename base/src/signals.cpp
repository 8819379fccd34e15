#include "dlaunch/signals.hpp"

#include <array>
#include <csignal>

namespace dlaunch {
namespace {

struct SignalName {
    const char* name;
    int number;
};
constexpr std::array kSignals{
    SignalName{"HUP", SIGHUP},       SignalName{"INT", SIGINT},   SignalName{"QUIT", SIGQUIT},
    SignalName{"ILL", SIGILL},       SignalName{"TRAP", SIGTRAP}, SignalName{"ABRT", SIGABRT},
    SignalName{"BUS", SIGBUS},       SignalName{"FPE", SIGFPE},   SignalName{"KILL", SIGKILL},
    SignalName{"USR1", SIGUSR1},     SignalName{"SEGV", SIGSEGV}, SignalName{"USR2", SIGUSR2},
    SignalName{"PIPE", SIGPIPE},     SignalName{"ALRM", SIGALRM}, SignalName{"TERM", SIGTERM},
    SignalName{"CHLD", SIGCHLD},     SignalName{"CONT", SIGCONT}, SignalName{"STOP", SIGSTOP},
    SignalName{"TSTP", SIGTSTP},     SignalName{"TTIN", SIGTTIN}, SignalName{"TTOU", SIGTTOU},
    SignalName{"URG", SIGURG},       SignalName{"XCPU", SIGXCPU}, SignalName{"XFSZ", SIGXFSZ},
    SignalName{"VTALRM", SIGVTALRM}, SignalName{"PROF", SIGPROF}, SignalName{"WINCH", SIGWINCH},
    SignalName{"SYS", SIGSYS},
};

}  // namespace

std::string signal_name(int signo) {
    for (auto& s : kSignals)
        if (s.number == signo) return std::string("SIG") + s.name;
    if (signo >= SIGRTMIN && signo <= SIGRTMAX) return "SIGRTMIN+" + std::to_string(signo - SIGRTMIN);
    return "signal " + std::to_string(signo);
}

std::optional<int> signal_number(const std::string& name) {
    for (auto& s : kSignals)
        if (name == s.name) return s.number;
    return std::nullopt;
}

int stack_signal() {
    return SIGRTMIN + 6;
}

}  // namespace dlaunch
