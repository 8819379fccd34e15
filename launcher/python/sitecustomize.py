# dlaunch's sitecustomize: lets the dlaunch agent ask this rank for its Python stacks (docs/hangs.md).
#
# dlaunch puts this file's directory first on a worker's PYTHONPATH. Python imports it at start-up (unless
# run with -S or -I); it registers Python's own faulthandler on DLAUNCH_STACK_SIGNAL, writing every thread's
# stack into DLAUNCH_STACKS_FILE, and announces itself there so that the agent signals only processes that
# listen (an unhandled real-time signal would kill). The signal never interrupts the program: every thread
# blocks it (torch's TCPStore fails with "Interrupted system call" when a signal lands in its connect loop),
# and a thread of dlaunch's own waits for it with sigwait() and dumps the stacks holding the GIL (a dump from
# a signal handler in one thread while another runs Python can crash the process). A program that holds the
# GIL and never lets it go gives no Python stack (its native stack is still taken). After each dump the
# thread writes "# dlaunch-stacks dumped pid=PID", for which the agent waits. That thread is ended
# at exit, before the interpreter's finalization. Then the sitecustomize it shadows, if any, runs as usual.
import importlib
import os
import sys


def _dlaunch_register_stack_signal():
    path = os.environ.get("DLAUNCH_STACKS_FILE")
    signo = os.environ.get("DLAUNCH_STACK_SIGNAL")
    if not path or not signo:
        return None
    try:
        import faulthandler  # faulthandler keeps `out` open for as long as the signal is registered
        out = open(path, "a", buffering=1)
        faulthandler.register(int(signo), file=out, all_threads=True, chain=False)  # should a thread unblock it
        _dlaunch_take_the_signal_in_a_thread(int(signo), out)
        out.write("# dlaunch-stacks pid=%d signal=%s\n" % (os.getpid(), signo))
        return out
    except (OSError, ValueError, RuntimeError) as e:
        sys.stderr.write("dlaunch: no Python stacks on request for this process: %s\n" % e)
        return None


_dlaunch_stack_thread_ends = []  # at exit, an Event: the thread's next wake-up ends it, once the Event is set


def _dlaunch_stack_signal_thread(signo, out):
    import faulthandler
    import signal
    while True:
        signal.sigwait({signo})
        if _dlaunch_stack_thread_ends:
            # Woken by the agent's signal while the exit handler ends it: alive until the handler's own
            # signal is sent, so that it never goes to a thread that is gone.
            _dlaunch_stack_thread_ends[0].wait(5)
            return
        try:
            faulthandler.dump_traceback(out, all_threads=True)
            out.write("# dlaunch-stacks dumped pid=%d\n" % os.getpid())  # the agent reads the dump once it is there
        except (OSError, ValueError):  # a full disk, a closed file: no dump this time, the thread lives on
            pass


# Run at exit (atexit: after the program's own exit handlers, while the interpreter is whole). Left alive
# into the interpreter's finalization, this thread made torch 2.6's gloo workers on Python 3.13 abort with
# "terminate called without an active exception" (4 of 24 four-rank runs on Debian 13; 0 of 54 when ended
# here). Only in the process that started it (a forked child has no such thread).
def _dlaunch_end_stack_signal_thread(thread, signo, pid):
    import signal
    import threading
    if os.getpid() != pid or not thread.is_alive():
        return
    signalled = threading.Event()
    _dlaunch_stack_thread_ends.append(signalled)
    try:
        signal.pthread_kill(thread.ident, signo)
    except OSError:
        pass
    signalled.set()
    thread.join(5)


def _dlaunch_take_the_signal_in_a_thread(signo, out):
    # Blocked first: the thread inherits the mask (sigwait needs it blocked), and so does every thread the
    # program starts later.
    import atexit
    import signal
    import threading
    signal.pthread_sigmask(signal.SIG_BLOCK, {signo})
    thread = threading.Thread(target=_dlaunch_stack_signal_thread, args=(signo, out), name="dlaunch-stacks",
                              daemon=True)
    thread.start()
    atexit.register(_dlaunch_end_stack_signal_thread, thread, signo, os.getpid())


def _dlaunch_run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    this = sys.modules.pop(__name__, None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")  # the next one on the path, as Python would have imported it
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        sys.modules[__name__] = this
    finally:
        sys.path[:] = saved


_dlaunch_stacks_file = _dlaunch_register_stack_signal()
_dlaunch_run_shadowed_sitecustomize()
