"""Run a command as a Linux *child subreaper* and write every exit status it collects.

A process's exit status goes to its parent; once a parent is killed its children are orphans, and
their status is lost to a test. Under a subreaper (``PR_SET_CHILD_SUBREAPER``) orphans of the
command become the subreaper's children: it writes ``{"pid": N, "code": C}`` for each (``-S``:
killed by signal S) to a JSON-lines file, the first line naming the command's pid. SIGTERM and
SIGINT are passed on to the command. Standard library only: it starts in a moment.

    python -m support.subreaper STATUS_FILE -- COMMAND...
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def main() -> int:
    status_path, command = sys.argv[1], sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT):  # a stop of the subreaper is a stop of its command
        signal.signal(sig, lambda s, _f: os.kill(child.pid, s))
    with open(status_path, "a", buffering=1) as out:
        out.write(json.dumps({"command": child.pid}) + "\n")
        code = 1
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                return code
            except InterruptedError:
                continue
            exit_code = os.waitstatus_to_exitcode(status)
            out.write(json.dumps({"pid": pid, "code": exit_code}) + "\n")
            if pid == child.pid:
                code = exit_code if exit_code >= 0 else 128 - exit_code


if __name__ == "__main__":
    sys.exit(main())
