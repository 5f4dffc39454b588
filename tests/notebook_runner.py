"""Executing a committed notebook in a fresh kernel, for the tests of the executable docs."""

from __future__ import annotations

from pathlib import Path

import pytest


def run_notebook(notebook: Path, cwd: Path, timeout: int = 600) -> str:
    """Execute ``notebook`` with ``cwd`` as its working directory; the text its cells printed.

    Inside a virtual environment jupyter_core searches its share/jupyter before the user's, so
    ``python3`` is the kernelspec ipykernel installed there; its argv starts with "python", which
    jupyter_client replaces by sys.executable: the interpreter that has ngraph_core.

    Raises:
        CellExecutionError: the first failing cell (nbclient's).
    """
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=timeout, startup_timeout=120,
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute()
    outputs = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]
    errors = [out for out in outputs if out.output_type == "error"]
    assert not errors, errors
    return "".join(out.get("text", "") for out in outputs if out.output_type == "stream")
