"""Run the project's commands (``python -m emergence``, ``python -m stats``, ...) as child processes,
started from a warm interpreter.

A test that runs ``[sys.executable, "-m", module, ...]`` through :func:`run` gets what
``subprocess.run`` gives (a ``CompletedProcess``; ``check``, ``timeout``, ``capture_output``,
``text``, ``cwd``, ``env``, ``input``): the command runs in a process of its own, with its own
working folder, environment, file descriptors, signals and exit status, as ``python -m`` runs it
(``runpy``, ``__main__``, ``sys.exit``, atexit handlers and non-daemon threads at the end).
What it skips is the import of torch, transformers, MLflow, Hydra and the project (about 4 s a
command on 2 cores): the child is forked from a server process that imported them once for the
test process (:class:`Forkserver`).

A command goes the cold way (plain ``subprocess.run``) whenever the warm one could differ: not a
``python -m`` of this interpreter; an environment that changes what those libraries read when they
are imported (``HF_*``, ``TRANSFORMERS_*``, ``TORCH*``, ``OMP_*``, ``PYTHONPATH``, ``EMERGENCE_PLUGINS``, ...); or
``EMERGENCE_COLD_COMMANDS=1`` (every command cold, as before). Tests that signal a command while it
runs (Ctrl-C, ``kill -9``) or run several at once start it with ``subprocess.Popen`` themselves.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional

#: Environment keys read when the warm libraries are imported: a command whose environment changes
#: one of them runs cold.
IMPORT_TIME_KEYS = ("HF_", "HUGGINGFACE", "TRANSFORMERS", "TORCH", "OMP_", "MKL_", "CUDA", "PYTORCH", "LD_",
                    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONWARNINGS", "TOKENIZERS", "MPL",
                    "EMERGENCE_PLUGINS")

_SERVER = r"""
import atexit, json, os, runpy, signal, sys, threading, traceback
import torch, transformers, mlflow, hydra, omegaconf, pandas, matplotlib  # noqa: F401  (the warm part)
import emergence.job, emergence.parent_run, emergence.console, stats.api  # noqa: F401
# What nearly every command imports next (about 4 s more on 2 cores): transformers' model code and the
# tiny families' model classes, MLflow's SQL store (with alembic and SQLite's dialect), the figures.
import transformers.modeling_utils, transformers.masking_utils, transformers.activations  # noqa: F401,E401
import mlflow.store.tracking.sqlalchemy_store, alembic.command, sqlalchemy.dialects.sqlite  # noqa: F401,E401
import stats.figures, matplotlib.backends.backend_agg  # noqa: F401,E401
for _family in ("gpt_neox", "olmo", "olmoe"):
    transformers.AutoModelForCausalLM._model_mapping[transformers.CONFIG_MAPPING[_family]]  # imports its module
sys.path.insert(0, TESTS)
import store_template  # a new SQLite store is a copy of a migrated one (tests/store_template.py)
store_template.install()
sys.path.remove(TESTS)

def child(req):
    code = 1
    try:
        os.setpgid(0, 0)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, path, flags in ((0, req["stdin"], os.O_RDONLY), (1, req["out"], os.O_WRONLY | os.O_TRUNC),
                                (2, req["err"], os.O_WRONLY | os.O_TRUNC)):
            os.dup2(os.open(path, flags), fd)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        sys.argv = [req["module"], *req["args"]]
        try:
            runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            traceback.print_exc()
        threading._shutdown()
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        sys.stdin = open(os.devnull)
        child(req)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""


class Forkserver:
    """One warm interpreter per test process: it forks a child for each command."""

    def __init__(self):
        self.env = dict(os.environ)
        server = f"TESTS = {str(Path(__file__).resolve().parent)!r}\n" + _SERVER
        self.proc = subprocess.Popen([sys.executable, "-c", server], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     cwd=Path(__file__).resolve().parents[1], env=self.env, text=True)
        self.lock = threading.Lock()
        self.ready = False

    def _line(self, timeout: Optional[float]) -> str:
        if timeout is not None and not select.select([self.proc.stdout], [], [], timeout)[0]:
            raise TimeoutError
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the forkserver died")
        return line

    def warm_for(self, env: dict) -> bool:
        changed = {k for k in set(env) | set(self.env) if env.get(k) != self.env.get(k)}
        return not any(k.startswith(IMPORT_TIME_KEYS) for k in changed)

    def run(self, cmd, module, args, cwd, env, input_, timeout, text):
        if not self.ready:
            if self._line(300).strip() != "ready":
                raise RuntimeError("the forkserver did not start")
            self.ready = True
        with tempfile.TemporaryDirectory(prefix="cmd-") as tmp:
            out, err, stdin = (Path(tmp) / n for n in ("out", "err", "in"))
            out.touch()
            err.touch()
            stdin.write_bytes(input_.encode() if isinstance(input_, str) else input_ or b"")
            req = dict(module=module, args=list(args), cwd=str(cwd or os.getcwd()), env=env, stdin=str(stdin),
                       out=str(out), err=str(err))
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            pid = json.loads(self._line(60))["pid"]
            try:
                code = json.loads(self._line(timeout))["code"]
            except TimeoutError:
                os.killpg(pid, signal.SIGKILL)
                self._line(60)
                raise subprocess.TimeoutExpired(cmd, timeout) from None
            o, e = out.read_bytes(), err.read_bytes()
        if text:
            o, e = o.decode(errors="replace"), e.decode(errors="replace")
        return subprocess.CompletedProcess(cmd, code, o, e)


_server: Optional[Forkserver] = None


def _module_of(cmd) -> Optional[str]:
    if isinstance(cmd, (list, tuple)) and len(cmd) >= 3 and str(cmd[0]) == sys.executable and cmd[1] == "-m":
        return str(cmd[2])
    return None


def run(cmd, *, cwd=None, env=None, capture_output=False, text=False, timeout=None, check=False, input=None,
        **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, ...)``, warm for ``python -m`` commands (see the module notes)."""
    global _server
    module = _module_of(cmd)
    env = dict(os.environ if env is None else env)
    cold = (module is None or not capture_output or kwargs or os.environ.get("EMERGENCE_COLD_COMMANDS") == "1")
    if not cold:
        if _server is None or _server.proc.poll() is not None:
            _server = Forkserver()
        cold = not _server.warm_for(env) or not _server.lock.acquire(blocking=False)
    if cold:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=capture_output, text=text, timeout=timeout,
                              check=check, input=input, **kwargs)
    try:
        proc = _server.run(cmd, module, cmd[3:], cwd, env, input, timeout, text)
    finally:
        _server.lock.release()
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout, proc.stderr)
    return proc
