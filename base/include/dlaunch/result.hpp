// Result<T>: a value or an Error{what, hint, kind}. Core functions return these; only the top of a program
// turns an Error into a message and an exit code (see exit_codes.hpp).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dlaunch {

// What a caller may branch on. Code decides on an Error's kind, never on its text; a kind is added only when
// some caller needs to tell it apart.
enum class ErrorKind {
    Failed,    // the operation failed; its text says how
    PeerGone,  // the other side is gone for good (its lease ended, it left): asking again will not help
};

// One message shape for the whole product: "dlaunch: <phase>: <object>: <problem>" then what to do.
struct Error {
    std::string what;  // "<phase>: <object>: <problem>", without the "dlaunch: " prefix
    std::string hint;  // what the user should do; may be empty when there is nothing to do
    ErrorKind kind = ErrorKind::Failed;
    // The length of the "<phase>: " that starts `what`, when made by in(): then the error can be told as
    // another phase's without anyone cutting its text.
    size_t phase_size = 0;

    // An error of PHASE: what = "PHASE: PROBLEM".
    static Error in(const std::string& phase, const std::string& problem, std::string hint = "",
                    ErrorKind kind = ErrorKind::Failed) {
        return Error{phase + ": " + problem, std::move(hint), kind, phase.size() + 2};
    }
    // What went wrong, without the phase that said it (all of `what` when it was not made by in()).
    std::string problem() const { return what.substr(phase_size); }
    // The same error, said by PHASE instead.
    Error told_as(const std::string& phase) const { return in(phase, problem(), hint, kind); }

    // The text without the program's prefix: "what; hint" (for a logger that adds "dlaunch: " itself).
    std::string describe() const { return what + (hint.empty() ? "" : "; " + hint); }
    // The full user-facing text: "dlaunch: what; hint".
    std::string message() const { return "dlaunch: " + describe(); }
};

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error error) : v_(std::move(error)) {}

    bool ok() const { return std::holds_alternative<T>(v_); }
    explicit operator bool() const { return ok(); }
    T& value() & { return std::get<T>(v_); }
    const T& value() const& { return std::get<T>(v_); }
    T&& value() && { return std::get<T>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    const Error& error() const { return std::get<Error>(v_); }

private:
    std::variant<T, Error> v_;
};

// For functions that succeed with nothing to return.
struct Ok {};
using Status = Result<Ok>;

}  // namespace dlaunch
