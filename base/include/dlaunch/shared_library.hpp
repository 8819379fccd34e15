// A system library opened on first use by its SONAME, and the functions taken from it. dlaunch-mpi and the
// agents only need libpmix and libslurm on some paths; linked, each costs every process start its
// relocations (bench/README.md) whether it is used or not.
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

namespace dlaunch {

class SharedLibrary {
public:
    // RTLD_GLOBAL: both libraries load plugins of their own that resolve the library's symbols (libslurm's
    // auth_munge.so needs slurm_conf, libpmix's MCA components likewise), as when they were linked.
    explicit SharedLibrary(const char* soname) : soname_(soname) {
        handle_ = ::dlopen(soname, RTLD_NOW | RTLD_GLOBAL);  // never closed
        if (!handle_) {
            const char* e = ::dlerror();
            error_ = e ? e : std::string("cannot open ") + soname;
        }
    }
    // Points fn at the library's symbol `name`; the first missing one is remembered in error().
    template <class Fn>
    void bind(Fn& fn, const char* name) {
        if (!handle_) return;
        fn = reinterpret_cast<std::remove_reference_t<Fn>>(::dlsym(handle_, name));
        if (!fn && error_.empty()) error_ = soname_ + " lacks " + name;
    }
    bool ok() const { return handle_ && error_.empty(); }
    const std::string& error() const { return error_; }

private:
    std::string soname_;
    void* handle_ = nullptr;
    std::string error_;
};

}  // namespace dlaunch
