"""The worker and reader sides of the process pool share no code by copy.

Both are clients of ``lab.pool``: a run of six or more lines that stands on both sides —
the same lines, or the same shape with other names, strings and numbers — is pool code that
belongs in ``lab.pool`` (the tickets, lanes, cancel, supervisor, spawn and message records were
written twice once, and a fix to one had to be found again in the other).
"""

from __future__ import annotations

import io
import keyword
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIDES = (ROOT / "lab" / "run", ROOT / "lab" / "read")
RUN_LINES = 6
# A dataclass field, an enum member or a named constant: every module has runs of these, and
# two records with fields of the same types are not copied logic.
_DECLARATION = re.compile(r"N : .*|N = [S0N]|N = - 0|N = [S0] [-+*/] [S0]|class N (\( N (, N)* \) )?:")
# Token kinds that carry no shape of their own.
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
         tokenize.ENDMARKER}


def shape_lines(source: str) -> list[tuple[int, str]]:
    """(line number, shape) per line with code: names become ``N``, strings ``S``, numbers ``0``
    (keywords stay); a line that is only punctuation, a name list (``a, b,``), part of an
    import, a decorator or a declaration (``_DECLARATION``) is left out, so import blocks,
    ``__all__`` and records of fields never match."""
    shapes: dict[int, list[str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in _SKIP:
            continue
        if tok.type == tokenize.NAME:
            text = tok.string if keyword.iskeyword(tok.string) or keyword.issoftkeyword(tok.string) else "N"
        elif tok.type == tokenize.STRING or tok.type in getattr(tokenize, "FSTRING_TYPES", ()):
            text = "S"
        elif tok.type == tokenize.NUMBER:
            text = "0"
        else:
            text = tok.string
        for row in range(tok.start[0], tok.end[0] + 1):  # a multi-line string counts on its lines
            shapes.setdefault(row, []).append(text if row == tok.start[0] else "S")
    out = []
    for row, parts in sorted(shapes.items()):
        line = " ".join(parts)
        if set(parts) <= {"N", "S", ",", "(", ")", "[", "]", "{", "}", ":", "."} and parts.count("N") <= 1:
            continue  # punctuation, a lone name or string: no shape
        if parts[0] in ("import", "from", "@") or line.startswith("N = [") or set(parts) <= {"N", ","}:
            continue
        if _DECLARATION.fullmatch(line):
            continue  # a field, an enum member, a constant: declarations, not logic
        out.append((row, line))
    return out


def runs_of(source: str, n: int = RUN_LINES) -> dict[tuple[str, ...], int]:
    """Each run of ``n`` consecutive shaped lines, with the line it starts on."""
    lines = shape_lines(source)
    return {tuple(s for _, s in lines[i:i + n]): lines[i][0] for i in range(len(lines) - n + 1)}


def shared_runs(side_a: dict[str, str], side_b: dict[str, str], n: int = RUN_LINES) -> list[str]:
    """``a.py:L ~ b.py:M`` for every run of ``n`` shaped lines standing in a file of each side."""
    runs_b: dict[tuple[str, ...], str] = {}
    for name, text in side_b.items():
        for run, line in runs_of(text, n).items():
            runs_b.setdefault(run, f"{name}:{line}")
    found = []
    for name, text in side_a.items():
        for run, line in runs_of(text, n).items():
            if run in runs_b:
                found.append(f"{name}:{line} ~ {runs_b[run]}")
    return found


def _side(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(folder.rglob("*.py"))}


def test_no_run_of_six_lines_repeats_between_the_worker_and_reader_sides_of_the_pool():
    # Before lab/pool this listed 42 runs (lab/run/queue.py:405 ~ lab/read/queue.py:179, the
    # supervisors' 182 ~ 216, the protocols' enums, the facades' shutdown, the children's entries).
    assert shared_runs(*(_side(f) for f in SIDES)) == []


def test_the_run_finder_finds_a_renamed_copy_and_ignores_import_blocks():
    # It must be able to fail: a supervisor loop copied with other names is found.
    original = '''
def serve(queue, worker):
    backoff_s = 1.0
    while not queue.stopping:
        launched = start(worker)
        if not launched:
            backoff_s = min(backoff_s * 2, 60.0)
            continue
        run(worker)
'''
    copy = original.replace("worker", "reader").replace("serve", "keep").replace("60.0", "30.0")
    found = shared_runs({"run.py": original}, {"read.py": copy})
    assert found and found[0] == "run.py:2 ~ read.py:2", found  # the copy's first run starts at its def
    imports = "from a import (\n" + "".join(f"    name{i},\n" for i in range(12)) + ")\n"
    assert shared_runs({"run.py": imports}, {"read.py": imports.replace("name", "other")}) == []
    assert shared_runs({"run.py": original}, {"read.py": "x = 1\n" * 10}) == []
