"""Language-model learners: tokens and log-probs, SFT, the BPCO critic, rollouts and SPIRAL self-play.

Importing this package does not import torch; the submodules that need it import it lazily or
at their top (``logprobs``, ``critic``, ``sft`` need torch).
"""
