"""neon optimizers (each builds one update op) and learning-rate schedules."""

from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .base import Optimizer, optimizer_from_config, optimizer_to_config, select_trainable
from .checks import OptimizerError
from .multi import MultiOptimizer
from .rmsprop import RMSProp
from .schedules import (
    CosineSchedule,
    ExpSchedule,
    PolySchedule,
    PowerSchedule,
    Schedule,
    StepSchedule,
    schedule_from_config,
    schedule_to_config,
)
from .sgd import GradientDescentMomentum

__all__ = [
    "Adadelta", "Adagrad", "Adam", "GradientDescentMomentum", "MultiOptimizer", "Optimizer", "OptimizerError",
    "RMSProp", "optimizer_from_config", "optimizer_to_config", "select_trainable",
    "CosineSchedule", "ExpSchedule", "PolySchedule", "PowerSchedule", "Schedule", "StepSchedule",
    "schedule_from_config", "schedule_to_config",
]
