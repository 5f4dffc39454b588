"""TensorBoard logging for ``fit`` (``callback.py``) and TensorBoard's event files from our IR (``events.py``)."""

from .callback import TensorBoard, training_results
from .events import (
    TensorBoardError,
    TensorBoardUnavailableError,
    graph_def,
    import_tensorboardx,
    node_names,
    scalar_tag,
    write_graph,
)

__all__ = ["TensorBoard", "TensorBoardError", "TensorBoardUnavailableError", "graph_def", "import_tensorboardx",
           "node_names", "scalar_tag", "training_results", "write_graph"]
