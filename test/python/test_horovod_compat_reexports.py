"""The `horovod` compatibility package only re-exports hvd (docs/python.md; STYLE.md section
11): every file under python/hvd/compat holds nothing but a docstring, `from hvd... import` /
`from horovod... import` statements and `__all__`. What Horovod scripts need to behave otherwise
lives in hvd, in hvd/torch/horovod_semantics.py, hvd/tensorflow/horovod_semantics.py and
hvd/_horovod_support.py."""
import ast
from pathlib import Path

import hvd

COMPAT = Path(hvd.__file__).parent / "compat"


def _is_reexport(node, first):
    if first and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
            and isinstance(node.value.value, str):
        return True  # the docstring
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return node.level == 0 and module.split(".")[0] in ("hvd", "horovod")
    if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == \
            ["__all__"]:
        return isinstance(node.value, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts)
    return False


def behaviour_in(path):
    """'file:line: what' for every top-level statement of `path` that is not a re-export."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path}:{node.lineno}: {type(node).__name__} "
            f"`{ast.get_source_segment(path.read_text(), node).splitlines()[0]}`"
            for i, node in enumerate(tree.body) if not _is_reexport(node, i == 0)]


def test_the_compat_package_holds_only_reexports():
    files = sorted(COMPAT.rglob("*.py"))
    assert len(files) > 20, f"expected the compatibility package under {COMPAT}"
    problems = [p for f in files for p in behaviour_in(f)]
    assert not problems, ("the horovod compatibility package must only re-export hvd (put "
                          "behaviour in hvd, e.g. hvd/*/horovod_semantics.py):\n"
                          + "\n".join(problems))


def test_the_check_names_the_file_and_line_of_any_behaviour(tmp_path):
    bad = tmp_path / "mpi_ops.py"
    bad.write_text('"""doc"""\nfrom hvd.torch import allgather\nimport os\n\n'
                   'def f():\n    pass\n__all__ = ["f"]\nx = 1\n')
    assert behaviour_in(bad) == [f"{bad}:3: Import `import os`",
                                 f"{bad}:5: FunctionDef `def f():`",
                                 f"{bad}:8: Assign `x = 1`"]
