"""The ``tdmcore`` process: what happens around a command.

:func:`main` is the console script.  It imports the commands
(:mod:`tdmcore.app.cli`) with Ctrl-C noted rather than raised, so that an interrupt
during the imports ends the command as any other does; turns SIGTERM into an
unwinding exception (:mod:`tdmcore.app.signals`), raised again where a callback
swallowed it; keeps stdout safe from a reader that goes away (``| head``);
and maps every way a command ends to one ``Error:`` line and an exit status.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
from typing import Any

from .signals import Terminated, raise_terminated, redelivered

__all__ = ["EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_TERMINATED", "PipeSafeStdout",
           "Terminated", "main"]

EXIT_INTERNAL = 70
#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130
#: Exit status after SIGTERM (128 + SIGTERM).
EXIT_TERMINATED = 143


def _import_cli() -> Any:
    """The command group, imported with Ctrl-C noted, not raised (about a second of
    imports: raised inside one, a KeyboardInterrupt prints a long traceback, or
    surfaces as another exception); None when Ctrl-C came.  An ignored SIGINT
    (``nohup``, ``cmd &`` in a script) stays ignored."""
    interrupted: list[int] = []
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main_thread else None
    own = main_thread and previous is signal.default_int_handler
    if own:
        signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    try:
        from .cli import cli  # click, rich, numpy, the simulator: about a second
    finally:
        if own:
            signal.signal(signal.SIGINT, previous)
    return None if interrupted else cli


class PipeSafeStdout(io.TextIOBase):
    """stdout that keeps the command going when its reader goes away (`| head`).

    The first broken pipe points the descriptor at /dev/null, so the rest of the
    output is discarded and the report is still written.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.broken = False

    def _break(self) -> None:
        self.broken = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._break()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._break()

    def isatty(self) -> bool:
        # a stream closed after the command (an embedding program's, a test's
        # capture) is no terminal: asked at exit (colorama's atexit) it must not raise
        try:
            return bool(self._stream.isatty())
        except ValueError:
            return False

    def fileno(self) -> int:
        return int(self._stream.fileno())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self._stream, "encoding", "utf-8"))


def _catch_sigterm() -> bool:
    """Turn SIGTERM into :class:`Terminated` while the command runs (main thread
    only, and only over the default disposition: an embedding program's own handler
    is left alone); True when the default is to be put back afterwards."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, raise_terminated)
    return True


def _answered(signum: int) -> None:
    """The command has answered this Ctrl-C or SIGTERM, and the process exits.

    * The same signal arriving again before the process is gone (one
      :func:`~tdmcore.app.signals.redelivered` sent again while the first unwound, a
      second Ctrl-C) is ignored.  Handled during the ``Error:`` line or the exit, it
      would end the process by the signal (exit -2 or -15, not 130 or 143) after the
      command had said why it stops.
    * An object the signal interrupted half-built (inside llvmlite, as Numba loaded a
      kernel) fails in its finalizer when the exit frees it; Python would print that
      "Exception ignored" traceback after the ``Error:`` line.  It is a consequence
      of the interruption, not news: such reports are dropped from now on.
    * A Ctrl-C that passed through code run from a string (``exec``/``eval`` of
      source, as dataclasses and Numba do) leaves CPython's "unhandled
      KeyboardInterrupt" mark set, and ``python -m tdmcore`` then ends by SIGINT
      (-2) instead of its exit code; every run of such code clears the mark on entry,
      so one harmless ``eval`` here clears it.

    The first two only over the command line's own handler, in the main thread: an
    embedding program's handlers are its own."""
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signum) in (signal.default_int_handler, raise_terminated):
        signal.signal(signum, signal.SIG_IGN)
        sys.unraisablehook = lambda unraisable: None
    if signum == signal.SIGINT:
        eval("None")  # clears the mark (pythonrun.c run_eval_code_obj), nothing else


def main(argv: list[str] | None = None) -> None:
    """Console entry point.

    Exit status: 0 on success (and after ``--help``); 2 for a usage error, 1 for bad
    input, each with one ``Error: ...`` line on stderr and no traceback; 130 after
    Ctrl-C (from the first moment: during the imports too) and 143 after SIGTERM
    (the report being written is removed either way); 70 for an internal error.  A
    closed stdout (``| head``) does not stop the command: the rest of the output is
    discarded and the report is still written.
    """
    cli = _import_cli()
    if cli is None:
        print("Error: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    import click  # after the commands: Ctrl-C during this import is noted too

    from ..framework import PolicyError

    real_stdout = sys.stdout
    sys.stdout = PipeSafeStdout(real_stdout)
    restore_sigterm = _catch_sigterm()
    try:
        with redelivered():  # a signal a callback swallowed (Numba's, llvmlite's)
            cli.main(args=argv, prog_name="tdmcore", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `tdmcore`: the help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(
            click.Context(cli, info_name="tdmcore")))
        sys.exit(0)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _answered(signal.SIGINT)
        print("Error: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Terminated:
        _answered(signal.SIGTERM)
        restore_sigterm = False  # ignored from now on: SIG_DFL would let a late one kill
        print("Error: terminated", file=sys.stderr)
        sys.exit(EXIT_TERMINATED)
    except click.UsageError as exc:
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        print(f"Error: {exc.format_message()}{hint}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        print(f"Error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except PolicyError as exc:  # a user's policy failed: its mistake, named
        if os.environ.get("TDMCORE_DEBUG"):
            raise
        print(f"Error: {exc} (set TDMCORE_DEBUG=1 for the traceback)", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:  # a bug: say so in one line, keep the traceback for debugging
        if os.environ.get("TDMCORE_DEBUG"):
            raise
        print(f"tdmcore: internal error: {type(exc).__name__}: {exc} "
              "(set TDMCORE_DEBUG=1 for the traceback)", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
    finally:
        if restore_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(BrokenPipeError, ValueError):
            sys.stdout.flush()
        sys.stdout = real_stdout


if __name__ == "__main__":
    main()
