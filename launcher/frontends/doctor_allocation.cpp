#include "dlaunch/doctor_allocation.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dlaunch/clock.hpp"
#include "dlaunch/group_auth.hpp"
#include "dlaunch/group_channel.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/ipv4.hpp"
#include "dlaunch/slurm/client.hpp"

namespace dlaunch {
namespace {

using std::chrono::milliseconds;

group::ChannelTimes doctor_times(double wait_seconds) {
    // The doctor has no heartbeat to keep: a node is heard or not within the wait.
    return {milliseconds(1000), seconds_ms(wait_seconds) + milliseconds(10000)};
}

}  // namespace

std::optional<AllocationPlace> allocation_of(const EnvMap& env, const PortRange& range, const std::string& log_dir) {
    const std::string job = str_var(env, "SLURM_JOB_ID"), step = str_var(env, "SLURM_STEP_ID");
    const std::string nodes = str_var(env, "SLURM_STEP_NUM_NODES"), tasks = str_var(env, "SLURM_STEP_NUM_TASKS");
    if (job.empty() || step.empty() || nodes.empty() || nodes == "1" || nodes != tasks) return std::nullopt;
    auto hosts = slurm::expand_hostlist(str_var(env, "SLURM_STEP_NODELIST"));
    if (!hosts || hosts->size() < 2) return std::nullopt;
    AllocationPlace p;
    p.node = int_var(env, "SLURM_NODEID").value_or(0);
    p.hosts = std::move(*hosts);
    const std::string& first = p.hosts.front();
    if (auto addr = resolve_ipv4(first))
        p.leader_addr = *addr;
    else  // asked of slurmctld only when the name does not resolve (every node asks at once)
        p.leader_addr = slurm::slurm_node_address(first).value_or(first);
    p.port = group_port(deterministic_port(job, step, range), range);
    p.run_id = "doctor-" + job + "." + step;
    p.marker = log_dir + "/.dlaunch-" + p.run_id;
    return p;
}

Status make_marker(const AllocationPlace& place) {
    std::ofstream out(place.marker);
    out << ::getpid() << "\n";
    if (!out) return Error{"doctor: cannot write " + place.marker, "check --log-dir (the log-dir check says more)"};
    return Ok{};
}

Result<doctor::AllocationFacts> gather_reports(const AllocationPlace& place, const doctor::Report& own,
                                               double wait_seconds, const doctor::AllocationFacts& log_dir) {
    const GroupAuth auth = munge_group_auth();
    const auto uid = static_cast<uint32_t>(::getuid());
    const int expected = static_cast<int>(place.hosts.size());
    group::Admit admit = [&](const group::Hello& hello) -> group::Admission {
        auto sender = auth.verify(hello);
        if (!sender) return {sender.error().what, false};
        return group::admission(hello, *sender, uid, place.run_id, expected);
    };
    struct RemoveMarker {
        const std::string& path;
        ~RemoveMarker() {
            std::error_code ec;
            std::filesystem::remove(path, ec);
        }
    } remove_marker{place.marker};
    auto channel =
        group::Leader::listen(host::listen_address(place.leader_addr), place.port, admit, doctor_times(wait_seconds));
    if (!channel) return channel.error();
    doctor::AllocationFacts f = log_dir;
    f.nodes.resize(place.hosts.size());
    for (size_t i = 0; i < place.hosts.size(); ++i) f.nodes[i].host = place.hosts[i];
    f.nodes[0] = {place.hosts[0], true, 0, true, own};
    const auto start = Clock::now();
    auto missing = [&f] {
        return std::any_of(f.nodes.begin(), f.nodes.end(), [](const doctor::NodeFacts& n) { return !n.heard; });
    };
    while (missing() && Clock::now() - start < seconds_ms(wait_seconds)) {
        for (const group::Event& e : channel->poll(milliseconds(100))) {
            auto* r = e.kind == group::Event::Kind::Received ? std::get_if<group::DoctorReport>(&e.message) : nullptr;
            if (!r || r->member < 1 || r->member >= expected) continue;
            auto report = doctor::report_from_json(nlohmann::json::parse(r->report, nullptr, false));
            if (!report) continue;
            f.nodes[static_cast<size_t>(r->member)] = {r->host, true, r->sent - now_epoch(), r->sees_log_dir, *report};
        }
    }
    f.waited = std::chrono::duration<double>(Clock::now() - start).count();
    return f;
}

Status send_report(const AllocationPlace& place, const doctor::Report& own, double wait_seconds) {
    const GroupAuth auth = munge_group_auth();
    const group::Hello hello{place.run_id, place.node, place.hosts.at(static_cast<size_t>(place.node)), "", 0, ""};
    const auto deadline = Clock::now() + seconds_ms(wait_seconds);
    for (;;) {
        auto channel = group::Member::join(place.leader_addr, place.port, hello, doctor_times(wait_seconds), auth.sign);
        if (!channel) {
            if (Clock::now() >= deadline) return channel.error();
            std::this_thread::sleep_for(milliseconds(200));
            continue;
        }
        // The welcome, then the hello: the report goes at once after them, so its time is its sending time.
        // A refusal (a credential node 0 does not take: another user, a clock minutes off) comes then.
        for (int i = 0; i < 3; ++i)
            for (const group::Event& e : channel->poll(milliseconds(100)))
                if (e.kind == group::Event::Kind::Refused || e.kind == group::Event::Kind::Lost)
                    return Error{"doctor: node 0 " +
                                     std::string(e.kind == group::Event::Kind::Refused ? "refused this node: "
                                                                                       : "closed the connection: ") +
                                     e.detail,
                                 "its report says more"};
        // Node 0 listens once its marker is there: a node that shares the directory sees it now (a network
        // file system may take a moment to show a new file).
        bool sees = false;
        std::error_code ec;
        for (int i = 0; i < 10 && !(sees = std::filesystem::exists(place.marker, ec)); ++i)
            std::this_thread::sleep_for(milliseconds(100));
        channel->send(group::DoctorReport{place.node, hello.host, now_epoch(), sees, doctor::to_json(own).dump()});
        for (int i = 0; i < 20; ++i)  // until the report went (node 0 closes once it has every report)
            for (const group::Event& e : channel->poll(milliseconds(100)))
                if (e.kind == group::Event::Kind::Lost || e.kind == group::Event::Kind::Refused) return Ok{};
        return Ok{};
    }
}

}  // namespace dlaunch
