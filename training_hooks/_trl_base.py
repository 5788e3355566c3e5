"""``TrainerMethods``: the base of ``training_hooks.trl.GSPODashMixin`` as mypy sees it.

At run time it is ``object`` (the mixin's next base is the ``GRPOTrainer`` it is mixed into); to
mypy it declares the ``GRPOTrainer`` methods the mixin wraps and calls through ``super()``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:

    class TrainerMethods:
        def train(self, *args: Any, **kwargs: Any) -> Any: ...
        def _calculate_rewards(self, *args: Any) -> Any: ...
        def _generate_and_score_completions(self, inputs: Any) -> Any: ...
        def _get_grad_norm(self, *args: Any, **kwargs: Any) -> Any: ...
        def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any: ...
        def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any: ...

else:
    TrainerMethods = object
