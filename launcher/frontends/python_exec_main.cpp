// dlaunch-python: what `srun --dist-launch train.py` really executes, on every Slurm release. The plugin
// replaces argv[0] with this helper and passes the script in DLAUNCH_SCRIPT; slurmstepd still runs
// TaskProlog, sets TMPDIR and limits, then execs us; we exec `python -u SCRIPT ARGS` with the rest of argv
// unchanged, after the defaults that depend on that interpreter's torch (env_contract.hpp's
// torch_build_env), which only the task, as its user, may learn.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "dlaunch/env_contract.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/torch_install.hpp"

int main(int argc, char** argv) {
    const char* script = std::getenv("DLAUNCH_SCRIPT");
    if (!script || !*script) {
        std::cerr << "dlaunch-python: DLAUNCH_SCRIPT is not set; this helper is run by the dlaunch SPANK plugin "
                     "(srun --dist-launch), not by hand\n";
        return dlaunch::exit_code::kUsage;
    }
    std::string python = std::getenv("DLAUNCH_PYTHON") ? std::getenv("DLAUNCH_PYTHON")
                         : std::getenv("PYTHON_EXEC")  ? std::getenv("PYTHON_EXEC")
                                                       : "python3";
    std::string script_path = script;
    ::unsetenv("DLAUNCH_SCRIPT");
    ::unsetenv("DLAUNCH_PYTHON");
    if (auto torch = dlaunch::host::torch_facts(python))
        for (const auto& [name, value] : dlaunch::torch_build_env(torch->store_without_libuv))
            ::setenv(name.c_str(), value.c_str(), 0);  // a user's value wins
    std::vector<char*> args{python.data(), const_cast<char*>("-u"), script_path.data()};
    for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    int e = errno;
    std::cerr << "dlaunch: exec: " << python << ": " << std::strerror(e)
              << "; give --dist-launch=python=/path/to/python3 or export PYTHON_EXEC\n";
    return e == ENOENT ? 127 : 126;
}
