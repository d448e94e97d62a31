"""Independent PPO for agent-slot environments: every agent has its own networks.

:class:`~fieldrl.domains.multiagent.AgentSlotVecEnv` makes each agent slot one SB3 env, so plain
PPO trains *one* network for all agents (parameter sharing). ``independent-ppo`` keeps the same
training loop but gives each agent separate parameters. It needs to know, per sample, whose
sample it is, so the environment appends a one-hot agent id to every observation and says so
with an ``n_agent_ids`` attribute (the number of one-hot entries; the UAV domain's ``agent_ids``
parameter turns it on). Then:

* the MLP extractor holds one policy MLP and one value MLP per agent and routes each sample
  (agent = argmax of the trailing one-hot entries, which survives observation normalisation)
  to its own agent's MLPs, which see the observation without the id;
* the extractor's latent is block-structured, ``[h_0, ..., h_{n-1}, onehot]`` with only the
  acting agent's block non-zero, and the action and value heads have no shared bias, so each
  head is an independent affine map per agent (weights of block ``i`` plus the one-hot
  column ``i`` as that agent's bias).

Each agent's parameters thus get gradients from its own samples only: independent learners
trained in one PPO loop. What they still share is the loop: one rollout buffer, the same
minibatches, advantage normalisation over the minibatch, one Adam optimiser (per-parameter
moments, so no coupling through them) and the global gradient-norm clip.

With no agent ids (``n_agent_ids`` 0 or absent) the policy is SB3's ``ActorCriticPolicy``
unchanged (one shared network), so a scenario can name ``independent-ppo`` for variants with and
without agent ids. Only action distributions without state-independent parameters are
supported (discrete, multi-discrete, binary): a Gaussian's shared ``log_std`` would couple agents.
"""

from __future__ import annotations

from typing import Any

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    MultiCategoricalDistribution,
)
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import MlpExtractor
from torch import nn


def agent_id_count(env: Any) -> int:
    """How many trailing one-hot agent-id entries ``env``'s observations carry (0: none)."""
    if env is None:
        return 0
    try:
        return int(env.get_attr("n_agent_ids", [0])[0])
    except (AttributeError, IndexError):
        return 0


def agent_index(features: torch.Tensor, n_agents: int) -> torch.Tensor:
    """Agent of each row: the argmax of the trailing one-hot (positive affine maps keep it)."""
    return features[:, features.shape[1] - n_agents :].argmax(dim=1)


class IndependentMlpExtractor(nn.Module):
    """One SB3 ``MlpExtractor`` per agent; a sample goes through its own agent's MLPs only.

    Latents are ``(batch, n_agents * h + n_agents)``: the agent's block holds its MLP output,
    the other blocks are zero, and the last ``n_agents`` columns are the agent's one-hot.
    """

    def __init__(
        self,
        feature_dim: int,
        n_agents: int,
        net_arch: Any,
        activation_fn: type[nn.Module],
        device: torch.device | str = "auto",
    ) -> None:
        super().__init__()
        if feature_dim <= n_agents:
            raise ValueError(f"observations of {feature_dim} numbers cannot end with {n_agents} agent ids")
        self.n_agents = n_agents
        self.agents = nn.ModuleList(
            MlpExtractor(feature_dim - n_agents, net_arch, activation_fn, device) for _ in range(n_agents)
        )
        self.block_pi = self.agents[0].latent_dim_pi
        self.block_vf = self.agents[0].latent_dim_vf
        self.latent_dim_pi = n_agents * (self.block_pi + 1)
        self.latent_dim_vf = n_agents * (self.block_vf + 1)

    def _route(self, features: torch.Tensor, which: str, block: int) -> torch.Tensor:
        n = self.n_agents
        idx = agent_index(features, n)
        x = features[:, : features.shape[1] - n]
        out = features.new_zeros(features.shape[0], n * block + n)
        for i, nets in enumerate(self.agents):
            rows = torch.nonzero(idx == i).squeeze(1)
            if rows.numel():
                net = nets.policy_net if which == "pi" else nets.value_net
                out[rows, i * block : (i + 1) * block] = net(x[rows])
        out[torch.arange(features.shape[0], device=features.device), n * block + idx] = 1.0
        return out

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return self._route(features, "pi", self.block_pi)

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return self._route(features, "vf", self.block_vf)


class IndependentActorCriticPolicy(ActorCriticPolicy):
    """``ActorCriticPolicy`` with separate parameters per agent (see the module docstring).

    :param n_agents: trailing one-hot agent-id entries of the observation; 0 = one shared network.
    """

    def __init__(self, *args: Any, n_agents: int = 0, **kwargs: Any) -> None:
        self.n_agents = int(n_agents)
        super().__init__(*args, **kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["n_agents"] = self.n_agents
        return data

    def _build_mlp_extractor(self) -> None:
        if self.n_agents <= 0:
            super()._build_mlp_extractor()
            return
        if not self.share_features_extractor:
            raise ValueError("independent-ppo needs share_features_extractor=True (the default)")
        self.mlp_extractor = IndependentMlpExtractor(  # type: ignore[assignment]
            self.features_dim, self.n_agents, self.net_arch, self.activation_fn, self.device
        )

    def _build(self, lr_schedule: Any) -> None:
        supported = (CategoricalDistribution, MultiCategoricalDistribution, BernoulliDistribution)
        if self.n_agents > 0 and not isinstance(self.action_dist, supported):
            raise ValueError(
                "independent-ppo supports discrete, multi-discrete and binary actions only "
                f"(a {type(self.action_dist).__name__} has parameters all agents would share)"
            )
        super()._build(lr_schedule)
        if self.n_agents <= 0:
            return
        ext = self.mlp_extractor
        assert isinstance(ext, IndependentMlpExtractor)
        n = self.n_agents
        for head, block, gain in ((self.action_net, ext.block_pi, 0.01), (self.value_net, ext.block_vf, 1.0)):
            assert isinstance(head, nn.Linear)
            with torch.no_grad():
                if self.ortho_init:  # each agent's block as SB3 initialises a head: orthogonal, gain
                    for i in range(n):
                        w = torch.empty(head.out_features, block)
                        nn.init.orthogonal_(w, gain=gain)
                        head.weight[:, i * block : (i + 1) * block] = w
                head.weight[:, n * block :] = 0.0  # per-agent biases (the one-hot columns) start at 0
                head.bias.zero_()
            head.bias.requires_grad_(False)  # a shared bias would couple the agents


class IndependentPPO(PPO):
    """PPO with :class:`IndependentActorCriticPolicy`; reads ``n_agents`` from the env's ``n_agent_ids``."""

    policy_aliases = {"MlpPolicy": IndependentActorCriticPolicy}  # noqa: RUF012 - as SB3 declares it

    def _setup_model(self) -> None:
        if "n_agents" not in self.policy_kwargs:  # a loaded model brings its own
            self.policy_kwargs = {**self.policy_kwargs, "n_agents": agent_id_count(self.env)}
        super()._setup_model()
