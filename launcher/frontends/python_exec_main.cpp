// dlaunch-python: what `srun --dist-launch train.py` really executes on Slurm versions without
// spank_prepend_task_argv. The plugin cannot insert "python3" before argv[0], so it replaces argv[0]
// with this helper and passes the script in DLAUNCH_SCRIPT; slurmstepd still runs TaskProlog, sets
// TMPDIR and limits, then execs us; we exec `python -u SCRIPT ARGS` with the rest of argv unchanged.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "dlaunch/exit_codes.hpp"

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
    std::vector<char*> args{python.data(), const_cast<char*>("-u"), script_path.data()};
    for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    int e = errno;
    std::cerr << "dlaunch: exec: " << python << ": " << std::strerror(e)
              << "; give --dist-launch=python=/path/to/python3 or export PYTHON_EXEC\n";
    return e == ENOENT ? 127 : 126;
}
