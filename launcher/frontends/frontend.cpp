#include "dlaunch/frontend.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <csignal>
#include <exception>
#include <iostream>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/host.hpp"

namespace dlaunch::frontend {

int guarded_main(const char* program, int (*run)(int, char**), int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << program << ": internal error: " << e.what() << "; please report this with the command line\n";
        return exit_code::kInternal;
    }
}

void setup_logging(const std::string& name, int verbosity, const EnvMap& env) {
    auto logger = spdlog::stderr_logger_st(name);
    logger->set_pattern("%n: %v");
    spdlog::level::level_enum level = spdlog::level::info;
    if (auto it = env.find("DLAUNCH_LOG"); it != env.end() && !it->second.empty() && verbosity == 0)
        level = spdlog::level::from_str(it->second);
    else if (verbosity < 0)
        level = spdlog::level::warn;
    else if (verbosity == 1)
        level = spdlog::level::debug;
    else if (verbosity > 1)
        level = spdlog::level::trace;
    logger->set_level(level);
    spdlog::set_default_logger(logger);
}

int end_as(int code, int signo) {
    if (signo == 0) return code;
    std::cout.flush();
    std::cerr.flush();
    if (auto logger = spdlog::default_logger()) logger->flush();
    host::remove_temporary_files();  // atexit() does not run for a death by signal
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(signo, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signo);
    ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
    ::raise(signo);
    return code;  // a signal whose default action is not to end the process
}

int fail(const Error& e, int code) {
    std::cerr << e.message() << "\n";
    return code;
}

}  // namespace dlaunch::frontend
