"""What training one learned policy is asked to do: :class:`TrainingSpec`, in the policies layer's own terms.

:mod:`~fieldrl.policies.learned` trains, saves and loads models from a :class:`TrainingSpec`; the
scenario builds one from its learned entry (``LearnedEntry.training_spec()``), with every default
filled in and every share of ``train_steps`` turned into env steps. So the policies layer never
reads a scenario (an import contract in ``.importlinter`` holds it to that), and what training
depends on is the list of fields below.

Importing this module imports nothing but the standard library (``fieldrl validate`` builds specs
without torch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WarmStart:
    """Behaviour cloning before RL (a scenario's ``imitate``); the demonstrations come from the caller.

    :param epochs: passes over the demonstrations.
    :param max_decisions: decisions kept for cloning at most (a uniform sample beyond).
    :param learning_rate: Adam's learning rate for the cloning.
    """

    epochs: int
    max_decisions: int
    learning_rate: float


@dataclass(frozen=True)
class FineTuneSchedule:
    """A ``fine_tune`` section in env steps: critic warm-up, actor ramp, the pull's weight and fade,
    the jump-start's horizon and stages (:mod:`~fieldrl.policies.fine_tune` acts on it).

    A zero turns a part off: no warm-up, no ramp, no pull (``pull_weight`` 0), no jump-start
    (``guide_horizon`` 0).
    """

    warmup: int = 0
    ramp: int = 0
    pull_weight: float = 0.0
    pull_fade: int = 0
    guide_horizon: int = 0
    guide_stages: int = 1

    @property
    def needs_clone(self) -> bool:
        """The pull and the jump-start use the clone as it was cloned (kept for a resumed training)."""
        return self.pull_weight > 0 or self.guide_horizon > 0

    def record(self) -> dict[str, Any]:
        """What the weights file's training record keeps of it (``policies.record.FineTuneSchedule``)."""
        return {
            "critic_warmup": self.warmup,
            "actor_ramp": self.ramp,
            "pull_weight": self.pull_weight,
            "pull_fade": self.pull_fade,
            "guide_horizon": self.guide_horizon,
            "guide_stages": self.guide_stages if self.guide_horizon else 0,
        }


@dataclass(frozen=True)
class TrainingSpec:
    """One learned policy's training, as :func:`~fieldrl.policies.learned.train_model` runs it.

    :param algorithm: a name in the algorithm table (:mod:`~fieldrl.policies.algorithms`).
    :param label: the policy's name in reports; names its TensorBoard log (``<label>-seed<seed>``).
    :param policy: SB3's policy class name (``MlpPolicy``, ...).
    :param hyperparameters: constructor arguments in YAML form
        (:func:`~fieldrl.policies.registry.build_kwargs` turns them into SB3's).
    :param train_steps: the training budget in env steps.
    :param n_envs: parallel training environments.
    :param normalize_obs: train behind ``VecNormalize``'s observation statistics (saved with the model).
    :param normalize_reward: scale rewards by ``VecNormalize``'s running return statistics.
    :param checkpoint_interval: env steps between resumable checkpoints (where the caller keeps them).
    :param imitate: behaviour-clone before RL (a new model only, not a resumed one); None: no warm start.
    :param fine_tune: how RL fine-tunes the warm start; None: as the algorithm does alone.
    """

    algorithm: str
    label: str
    policy: str
    hyperparameters: dict[str, Any]
    train_steps: int
    n_envs: int
    normalize_obs: bool
    normalize_reward: bool
    checkpoint_interval: int
    imitate: WarmStart | None = None
    fine_tune: FineTuneSchedule | None = None

    @property
    def normalized(self) -> bool:
        """Training runs behind ``VecNormalize`` (observations, rewards or both)."""
        return self.normalize_obs or self.normalize_reward
