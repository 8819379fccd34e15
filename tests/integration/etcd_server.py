"""A real etcd (Debian's etcd-server) for the tests of --rdzv-backend etcd: started on loopback ports in a
test's directory, stopped with the test. A missing etcd fails the test (packaging/debian-deps.sh installs it)."""
import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

from conftest import free_port


class Etcd:
    def __init__(self, directory):
        self.binary = shutil.which("etcd") or "/usr/bin/etcd"
        if not os.access(self.binary, os.X_OK):
            pytest.fail("etcd is missing: install etcd-server (packaging/debian-deps.sh does)")
        self.data = directory / "etcd-data"
        self.log = directory / "etcd.log"
        self.proc = None
        # free_port() frees its port before etcd binds it: a test running beside this one may take it
        # meanwhile. Then etcd exits at once ("address already in use") and new ports are tried.
        for _ in range(3):
            self.port, self.peer = free_port(), free_port()
            self.endpoint = f"127.0.0.1:{self.port}"
            if self.start(ports_taken_is_an_answer=True):
                return
            shutil.rmtree(self.data, ignore_errors=True)  # it may name the peer port it could not have
        pytest.fail(f"etcd found its ports taken three times:\n{self.log.read_text()}")

    def start(self, ports_taken_is_an_answer=False):
        """Starts etcd and waits until it answers; True then. False when it exited because one of its ports was
        taken and `ports_taken_is_an_answer`; anything else fails the test."""
        client, peer = f"http://{self.endpoint}", f"http://127.0.0.1:{self.peer}"
        said_before = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [self.binary, "--name", "t", "--data-dir", str(self.data), "--listen-client-urls", client,
                 "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"t={peer}",
                 "--enable-v2"],  # torch's own etcd-v2 rendezvous (python3-etcd) speaks etcd's v2 API
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            said = self.log.read_bytes()[said_before:].decode(errors="replace")
            if self.proc.poll() is not None:
                if ports_taken_is_an_answer and "address already in use" in said:
                    return False
                pytest.fail(f"etcd exited with {self.proc.returncode}:\n{self.log.read_text()}")
            # Answered by this etcd, not by another that holds the port: it says it serves there (etcd 3.4:
            # "serving insecure client requests on ADDRESS", 3.5: "serving client traffic ...", "address":...).
            serving_here = any("serving" in line and "client" in line and self.endpoint in line
                               for line in said.splitlines())
            if serving_here and self.answers():
                return True
            time.sleep(0.1)
        pytest.fail(f"etcd did not answer on {self.endpoint} within 30 s:\n{self.log.read_text()}")

    def answers(self):
        try:
            self.keys("/")
            return True
        except OSError:
            return False

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def call(self, path, request):
        """One request to etcd's JSON gateway, its answer."""
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a site's web proxy
        with direct.open(f"http://{self.endpoint}/v3/{path}", json.dumps(request).encode(), timeout=5) as reply:
            return json.load(reply)

    def keys(self, prefix):
        """The keys under `prefix`."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        kvs = self.call("kv/range", {"key": b64(prefix), "range_end": b64(end)}).get("kvs", [])
        return sorted(base64.b64decode(kv["key"]).decode() for kv in kvs)

    def put_leased(self, key, value, ttl):
        """`key` = `value` under a lease of its own (as a node's entry is), ended by revoke() or `ttl` seconds
        without a keep-alive; the lease's id."""
        lease = self.call("lease/grant", {"TTL": ttl})["ID"]
        self.call("kv/put", {"key": b64(key), "value": b64(value), "lease": lease})
        return lease

    def revoke(self, lease):
        """Ends `lease`: its keys go."""
        self.call("lease/revoke", {"ID": lease})


def b64(text):
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def etcd(tmp_path):
    server = Etcd(tmp_path)
    yield server
    if server.proc.poll() is None:
        server.kill()
