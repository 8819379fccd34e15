// Result<T>: a value or an Error{what, hint}. Core functions return these; only the top of a program
// turns an Error into a message and an exit code (see exit_codes.hpp).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dlaunch {

// One message shape for the whole product: "dlaunch: <phase>: <object>: <problem>" then what to do.
struct Error {
    std::string what;  // "<phase>: <object>: <problem>", without the "dlaunch: " prefix
    std::string hint;  // what the user should do; may be empty when there is nothing to do

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
