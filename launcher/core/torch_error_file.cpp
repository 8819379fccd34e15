#include "dlaunch/torch_error_file.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

namespace dlaunch {

const FailureRecord* error_file_root_cause(const RunOutcome& outcome) {
    const FailureRecord* root = nullptr;
    for (const FailureRecord& f : outcome.failures)
        if (f.failure.root_cause && (!root || f.failure.attempt >= root->failure.attempt)) root = &f;
    if (!root || root->error_file.empty()) return nullptr;
    return root;
}

std::string launcher_record_of_worker(const std::string& worker_file, const ExitStatus& status) {
    auto j = nlohmann::ordered_json::parse(worker_file, nullptr, false);
    if (j.is_discarded()) return worker_file;
    // torch's ProcessFailure.exitcode: the code, or minus the signal's number.
    const int error_code = status.signaled ? -status.code : status.code;
    if (error_code != 0 && j.is_object() && j.contains("message") && j["message"].is_object())
        j["message"]["errorCode"] = error_code;
    return j.dump();
}

std::string launcher_record_of_error(const std::string& message, double epoch) {
    nlohmann::ordered_json j{
        {"message",
         {{"message", message},
          {"extraInfo",
           {{"py_callstack", ""}, {"timestamp", std::to_string(static_cast<long long>(std::floor(epoch)))}}}}}};
    return j.dump();
}

}  // namespace dlaunch
