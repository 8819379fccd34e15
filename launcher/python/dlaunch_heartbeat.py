"""Heartbeats from a rank to the dlaunch agent (docs/hangs.md).

    import dlaunch_heartbeat
    for step, batch in enumerate(loader):
        train_step(batch)
        dlaunch_heartbeat.beat(f"step {step}")

dlaunch puts this module's directory on every worker's PYTHONPATH. beat() writes one line,
"beat <RANK> [NOTE]", into the FIFO named by DLAUNCH_HEARTBEAT_FILE; it never blocks and never raises, and
does nothing when the script is not run by dlaunch. A rank that sends heartbeats is judged by them: it is
hung when none came for --hang-timeout, or for the timeout dlaunch learns from the intervals it saw.
"""
import os

_MAX_NOTE = 400


def beat(note=""):
    """Sends one heartbeat; returns whether the agent got it."""
    path = os.environ.get("DLAUNCH_HEARTBEAT_FILE")
    rank = os.environ.get("RANK")
    if not path or rank is None:
        return False
    note = str(note)[:_MAX_NOTE].replace("\n", " ").replace("\r", " ")
    line = ("beat %s %s" % (rank, note) if note else "beat %s" % rank) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return os.write(fd, line.encode()) == len(line.encode())
    except OSError:
        return False
    finally:
        os.close(fd)
