"""The Debian packages of this build (packaging/CMakeLists.txt), built and installed by tests/run-tests.sh:
lintian finds nothing to warn about, the control fields say what they must (Depends with Slurm's and PMIx's
bounds, the plugstack.conf.d snippet a conffile), the installed files are this build's, and a CMake program
finds dlaunch with find_package(dlaunch).

    DLAUNCH_BUILD_DIR    the build tree the packages came from (its packages/ holds the .debs)
    DLAUNCH_VERSION      the version they carry
"""
import glob
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

PACKAGES = ("dlaunch", "dlaunch-slurm", "libdlaunch-dev")
SNIPPET = "/etc/slurm/plugstack.conf.d/dlaunch.conf"


def required_env(name):
    value = os.environ.get(name, "")
    if not value:
        pytest.fail(f"{name} is not set (tests/CMakeLists.txt sets it)", pytrace=False)
    return value


BUILD = Path(required_env("DLAUNCH_BUILD_DIR"))
VERSION = required_env("DLAUNCH_VERSION")


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def debs():
    arch = run("dpkg", "--print-architecture").stdout.strip()
    found = {p: BUILD / "packages" / f"{p}_{VERSION}_{'all' if p.startswith('lib') else arch}.deb" for p in PACKAGES}
    missing = [str(f) for f in found.values() if not f.is_file()]
    assert not missing, f"not built: {missing} (cmake --build {BUILD} --target package)"
    return found


def field(deb, name):
    return run("dpkg-deb", "-f", deb, name).stdout.strip()


def test_lintian_has_no_error_warning_or_pedantic_tag(debs):
    proc = run("lintian", "--pedantic", "--fail-on", "error,warning,pedantic", *debs.values())
    assert proc.returncode == 0 and not re.search(r"^[EWP]: ", proc.stdout, re.M), proc.stdout + proc.stderr


def test_depends_bound_slurm_and_pmix_to_what_the_build_used(debs):
    version = run("dpkg-query", "-W", "-f=${Version}", "slurm-wlm-basic-plugins").stdout
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()
    slurm = field(debs["dlaunch-slurm"], "Depends")
    assert f"dlaunch (= {VERSION})" in slurm, slurm
    assert f"slurm-wlm-basic-plugins (>= {major}.{minor}~)" in slurm, slurm
    assert f"slurm-wlm-basic-plugins (<< {major}.{int(minor) + 1:02d}~)" in slurm, slurm
    # The package holding libpmix.so.2: libpmix2 on Debian 12, libpmix2t64 on Debian 13.
    library = glob.glob("/usr/lib/*/libpmix.so.2")[0]
    package = run("dpkg-query", "-S", os.path.realpath(library)).stdout.split(":")[0]
    pmix = run("dpkg-query", "-W", "-f=${Version}", package).stdout.split("-")[0]
    assert f"{package} (>= {pmix})" in field(debs["dlaunch"], "Depends")
    # libcurl is dlopen()ed for etcd, so dpkg-shlibdeps does not see it: the package names it.
    curl = run("dpkg-query", "-S", os.path.realpath(glob.glob("/usr/lib/*/libcurl.so.4")[0])).stdout.split(":")[0]
    assert re.search(rf"(^|, ){re.escape(curl)} \(>= [0-9.]+\)", field(debs["dlaunch"], "Depends")), curl
    # Nettle likewise (opened by the paths that prove or hash: several nodes, a secret, etcd).
    nettle = run("dpkg-query", "-S", os.path.realpath(glob.glob("/usr/lib/*/libnettle.so.8")[0])).stdout.split(":")[0]
    assert re.search(rf"(^|, ){re.escape(nettle)} \(>= [0-9.]+\)", field(debs["dlaunch"], "Depends")), nettle
    assert field(debs["libdlaunch-dev"], "Architecture") == "all"


def test_the_launchers_load_no_library_only_some_paths_need(debs):
    # libslurm, libpmix, libcurl (with its TLS, Kerberos and LDAP libraries) and Nettle are opened by the paths
    # that use them: linked, each would cost every agent's and every rank's start (bench/README.md; Nettle
    # ~0.25 ms, nettle_api.hpp), and the SPANK plugin's in every slurmstepd. OpenSSL's libcrypto is not used at
    # all: Nettle proves the rendezvous (~2 ms less per agent, rdzv_auth.hpp).
    plugin = [l.split()[1] for l in Path(SNIPPET).read_text().splitlines() if l.startswith("optional ")]
    assert len(plugin) == 1 and Path(plugin[0]).is_file(), plugin
    for program in ("/usr/bin/dlaunch", "/usr/bin/dlaunch-mpi", "/usr/libexec/dlaunch/dlaunch-watch", plugin[0]):
        needed = re.findall(r"\(NEEDED\).*\[(.+)\]", run("readelf", "-d", program).stdout)
        assert needed and "libc.so.6" in needed, (program, needed)
        linked = [n for n in needed if re.match(r"lib(slurm|pmix|curl|ssl|crypto|gnutls|krb5|ldap|nettle|stdc\+\+)", n)]
        assert not linked, f"{program} links {linked}"


def test_the_plugstack_snippet_is_a_conffile_naming_the_installed_plugin_and_helper(debs, tmp_path):
    run("dpkg-deb", "-e", debs["dlaunch-slurm"], tmp_path / "control")
    assert (tmp_path / "control" / "conffiles").read_text().split() == [SNIPPET]
    line = [l for l in Path(SNIPPET).read_text().splitlines() if l.startswith("optional ")]
    assert len(line) == 1, line
    _, plugin, pyexec = line[0].split()
    assert Path(plugin).is_file() and plugin.startswith("/usr/lib/") and plugin.endswith("/spank_dlaunch.so")
    assert pyexec == "pyexec=/usr/libexec/dlaunch/dlaunch-python" and os.access(pyexec[7:], os.X_OK)


def build_id(path):
    notes = run("readelf", "-n", path).stdout
    found = re.search(r"Build ID: ([0-9a-f]+)", notes)
    assert found, f"{path}: no build id"
    return found.group(1)


def test_the_installed_files_are_this_builds(debs):
    for package in PACKAGES:
        assert run("dpkg-query", "-W", "-f=${Version}", package).stdout == VERSION, f"{package} is not installed"
    plugin = Path(SNIPPET).read_text().split("optional ")[1].split()[0]
    for installed, built in [("/usr/bin/dlaunch", "launcher/dlaunch"), ("/usr/bin/dlaunch-mpi", "launcher/dlaunch-mpi"),
                             ("/usr/libexec/dlaunch/dlaunch-python", "launcher/dlaunch-python"),
                             ("/usr/libexec/dlaunch/dlaunch-watch", "launcher/dlaunch-watch"),
                             (plugin, "launcher/spank_dlaunch.so")]:
        assert build_id(installed) == build_id(BUILD / built), f"{installed} is not {BUILD / built}"
    for alias in ("dlaunch-launch", "dlaunch-paddle"):
        assert os.readlink(f"/usr/bin/{alias}") == "dlaunch"


def test_every_program_has_a_man_page():
    for program in ("dlaunch", "dlaunch-launch", "dlaunch-paddle", "dlaunch-mpi"):
        page = Path(f"/usr/share/man/man1/{program}.1.gz")
        assert page.is_file(), page
        text = run("zcat", page).stdout
        assert f"{program} \\- " in text and "\\-\\-help" in text, text[:400]


def test_find_package_gives_the_heartbeat_target(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.25)
        project(consumer LANGUAGES CXX)
        set(CMAKE_CXX_STANDARD 20)
        find_package(dlaunch 0.1 REQUIRED)
        add_executable(consumer main.cpp)
        target_link_libraries(consumer PRIVATE dlaunch::heartbeat)
        """))
    (tmp_path / "main.cpp").write_text(textwrap.dedent("""\
        #include <dlaunch/heartbeat.hpp>
        #include <cstdio>
        int main() { std::fputs(dlaunch::heartbeat::format(3, "step 7").c_str(), stdout); }
        """))
    configure = run("cmake", "-S", tmp_path, "-B", tmp_path / "build")
    assert configure.returncode == 0, configure.stdout + configure.stderr
    assert "/usr/share/cmake/dlaunch" in (tmp_path / "build" / "CMakeCache.txt").read_text()
    build = run("cmake", "--build", tmp_path / "build")
    assert build.returncode == 0, build.stdout + build.stderr
    assert run(tmp_path / "build" / "consumer").stdout == "beat 3 step 7\n"
